package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/agents/executor"
)

// forkImplFlags adds --fork-impl and --differential to a command that
// opens a target; the result wraps the opened target accordingly.
func forkImplFlags(fs *flag.FlagSet) func(agents.Target, error) (agents.Target, error) {
	impl := fs.String("fork-impl", "", "fork implementation the program's processes fork with, checked per fork (a fork that did not use it is a harness error): "+strings.Join(executor.ForkImplNames(), ", ")+" (default: the kernel as it is, unchecked)")
	diff := fs.Bool("differential", false, "with --fork-impl: run every program a second time with stock fork; a difference in what any process saw is a finding")
	return func(t agents.Target, err error) (agents.Target, error) {
		if err != nil || *impl == "" {
			if err == nil && *diff {
				t.Close()
				return nil, fmt.Errorf("--differential needs --fork-impl")
			}
			return t, err
		}
		w, err := agents.NewForkImplTarget(t, *impl, *diff)
		if err != nil {
			t.Close()
			return nil, err
		}
		// The definitive check before any program: a campaign on which
		// the mode does not take effect stops here (exit 2).
		if err := w.Calibrate(); err != nil {
			t.Close()
			return nil, err
		}
		w.Log = os.Stderr
		fmt.Fprintf(os.Stderr, "fork implementation: %s on the %s target (evidence checked per fork", *impl, t.Name())
		if *diff {
			fmt.Fprint(os.Stderr, "; differential against stock fork")
		}
		fmt.Fprintln(os.Stderr, "; "+w.Calibration+")")
		return w, nil
	}
}
