package campaign

import (
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/agents"
	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/fuzz/obs"
	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// judgedRun is one program's run and verdict as the campaign takes them in.
type judgedRun struct {
	o           *obs.Observation
	v           *judge.Verdict
	herr        error
	ran, judged time.Duration // both runs' time, when it ran again
	kept        time.Duration // the run whose verdict was taken
	reruns      int           // runs with every word after a digests-first run
}

// runJudged runs p on t with opt and judges it. A run whose views held
// page digests where no thread races (opt.DigestsFirst) runs once more
// with every word when its verdict needs them: a content mismatch known
// by digest only (its signature would say "digest", not what the page
// held), or pages and cells the checker could not judge without words.
// The rerun's verdict is taken unless it lost a finding the first run
// showed (a race that did not come back): then the first stays, and
// says so.
func runJudged(t agents.Target, p *prog.Program, opt agents.Options) judgedRun {
	var jr judgedRun
	from := time.Now()
	o, err := t.Run(p, opt)
	jr.ran = time.Since(from)
	jr.kept = jr.ran
	from = time.Now()
	v, herr := judge.Judge(p, o, err)
	jr.judged = time.Since(from)
	jr.o, jr.v, jr.herr = o, v, herr
	if !opt.DigestsFirst || herr != nil || !NeedsWords(v) {
		return jr
	}
	opt.DigestsFirst = false
	jr.reruns = 1
	from = time.Now()
	o2, err2 := t.Run(p, opt)
	ran2 := time.Since(from)
	jr.ran += ran2
	from = time.Now()
	v2, herr2 := judge.Judge(p, o2, err2)
	jr.judged += time.Since(from)
	switch {
	case herr2 != nil:
		v.Notes = append(v.Notes, "the views held page digests only where no thread races; the rerun with every word failed: "+herr2.Error())
	case len(v2.Issues) > 0 || len(v.Issues) == 0:
		jr.o, jr.v, jr.kept = o2, v2, ran2
		v2.Notes = append(v2.Notes, "judged from a rerun with every view's words (the first run's views held page digests only where no thread races, and its verdict needed words)")
	default:
		for i := range v.Issues {
			if isDigest(v.Issues[i].Signature) {
				v.Issues[i].Explanation += " (the views held page digests only; a rerun with every word did not show it again)"
			}
		}
		v.Notes = append(v.Notes, "a rerun with every view's words showed none of this run's findings")
	}
	return jr
}

// NeedsWords says whether verdict v of a digests-first run needs the
// views' words (runJudged runs it again with them).
func NeedsWords(v *judge.Verdict) bool {
	if v.Judged.WordsMissing > 0 {
		return true
	}
	for _, is := range v.Issues {
		if isDigest(is.Signature) {
			return true
		}
	}
	return false
}

// isDigest: sig is a content finding known by page digest only
// (checker: ORACLE:digest:KIND).
func isDigest(sig string) bool { return strings.Contains(sig, ":digest:") }

// digestBack says whether digest finding sig (ORACLE:digest:KIND) came
// back as got: a content finding on the same kind of page that names
// what the page held (runs with every word). The oracle may differ: by
// digest alone the checker cannot tell whose store a page shows, so a
// finding that words would call isolation is a snapshot or memory one.
func digestBack(sig, got string) bool {
	_, kind, ok := strings.Cut(sig, ":digest:")
	if !ok || isDigest(got) {
		return ok && got == sig
	}
	o, rest, _ := strings.Cut(got, ":")
	cause, gotKind, _ := strings.Cut(rest, ":")
	return contentOracles[o] && cause != "" && gotKind == kind
}

// contentOracles are the oracles of the checker's content findings.
var contentOracles = map[string]bool{"snapshot": true, "memory": true, "shared": true, "isolation": true}
