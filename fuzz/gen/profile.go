package gen

import (
	"fmt"
	"sort"
	"strings"
)

// Profiles are named weight presets for campaigns that aim at one class of
// bugs. A profile's name is part of what a seed replays: the same seed
// under another profile generates other programs.
var profiles = map[string]func() Weights{
	"default": DefaultWeights,
	// threads: every fork of the main process runs under writer threads,
	// with more racing VMA operations on threads and no pinned pages (the
	// consistent-cut oracle at full strength).
	"threads": func() Weights {
		w := DefaultWeights()
		w.ThreadProb, w.ThreadVMAProb, w.MaxWriters = 1, 0.3, 4
		w.ProcMem, w.PVWrite, w.ODirect, w.Vmsplice, w.ReadPipe, w.UringReg, w.UringRead, w.UffdWP = 0, 0, 0, 0, 0, 0, 0, 0
		return w
	},
	// everypage: after every fork the parent stores to every page of
	// every region before the child looks (and half of the children do
	// the same first), and half the forks run under writer threads that
	// store to every page of a region all through the fork: the oracles
	// judge every page, not the ones a random store hits.
	"everypage": func() Weights {
		w := DefaultWeights()
		w.EveryPageProb, w.EveryPageChildProb, w.EveryPageWriterProb = 1, 0.5, 1
		w.ThreadProb, w.PreForkAdviceProb = 0.5, 0.4
		return w
	},
	// migrate: most forks of the main process run while a thread moves
	// a region's pages between NUMA nodes (migrateloop), half of them
	// followed by a store to every page of it; more one-off migrates.
	// Aimed at fork meeting migration entries (a VM has two nodes).
	"migrate": func() Weights {
		w := DefaultWeights()
		w.MigrateLoopProb, w.Migrate = 0.8, 8
		return w
	},
	// short: small programs (Weights.Short: at most two regions, four
	// steps, two forks); why they are not the default is in
	// docs/programs.md.
	"short": func() Weights { return DefaultWeights().Short() },
	// pinned: GUP writes, O_DIRECT, vmsplice and io_uring fixed buffers
	// around forks, often racing them.
	"pinned": func() Weights {
		w := DefaultWeights()
		w.ProcMem, w.PVWrite, w.ODirect, w.Vmsplice, w.ReadPipe, w.UringReg, w.UringRead, w.UffdWP = 12, 6, 8, 8, 6, 3, 8, 3
		w.ThreadVMAProb = 0.3
		return w
	},
}

// Profile returns the weights of a named profile.
func Profile(name string) (Weights, error) {
	if f, ok := profiles[name]; ok {
		return f(), nil
	}
	return Weights{}, fmt.Errorf("unknown profile %q (want one of %s)", name, strings.Join(ProfileNames(), ", "))
}

// ProfileNames lists the profiles.
func ProfileNames() []string {
	var ns []string
	for n := range profiles {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}
