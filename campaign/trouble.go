package campaign

import (
	"fmt"
	"strings"
	"time"

	"github.com/forkfuzz/forkfuzz/checker/judge"
	"github.com/forkfuzz/forkfuzz/internal/oracle"
)

// HarnessTrouble says whether sig is harness trouble, and whether it is a
// hang: an executor death or hang, a lost connection to a VM, a VM that
// sent nothing (no kernel report). It may be the kernel's doing or the
// harness's (a slow program on a loaded TCG guest, the executor's own
// bug): it counts against the kernel only when it comes back on a
// replay, and a hang only when it comes back with a longer timeout than
// the one it ran out of. (A kernel report on the console makes the
// signature a kernel one: kernel-bug/..., kernel-hang/INFO-... .)
func HarnessTrouble(sig string) (trouble, hang bool) {
	switch oracle.FromSignature(sig) {
	case oracle.ExecutorHang:
		return true, true
	case oracle.ExecutorCrash, oracle.KernelLostConnection:
		return true, false
	case oracle.KernelHang:
		// A VM that sent nothing, not a console report (hung task,
		// RCU stall: the kernel's own words).
		vm := strings.HasPrefix(sig, string(oracle.KernelHang)+"/VM-hang")
		return vm, vm
	}
	return false, false
}

// ReplayTimeoutScale: a run that decides a hang gets this many times the
// time of the run that hung (at least MinHangReplayTimeout).
const ReplayTimeoutScale = 2

// MinHangReplayTimeout is the least time a replay deciding a hang gets.
const MinHangReplayTimeout = time.Minute

// hangReplayTimeout is the timeout of runs that decide whether f, a hang,
// comes back (0: f is no hang, the target's own).
func hangReplayTimeout(f *Finding) time.Duration {
	if _, hang := HarnessTrouble(f.Issue.Signature); !hang {
		return 0
	}
	return max(ReplayTimeoutScale*f.RunTime, MinHangReplayTimeout)
}

// unconfirmedTrouble says why f does not count against the kernel ("":
// it does): harness trouble that did not come back on its replays.
func unconfirmedTrouble(f *Finding) string {
	trouble, hang := HarnessTrouble(f.Issue.Signature)
	if !trouble || f.Reproduced > 0 {
		return ""
	}
	what := "died"
	if hang {
		what = fmt.Sprintf("ran out of time (replayed with a timeout of %v)", hangReplayTimeout(f).Round(time.Second))
	}
	if f.Replays == 0 {
		return fmt.Sprintf("the executor or VM %s and was never replayed", what)
	}
	return fmt.Sprintf("the executor or VM %s, but not again on %d replays", what, f.Replays)
}

// Blamed counts the signatures of failing runs that count against the
// kernel: every failing signature but the harness trouble that did not
// come back on its replays (Unconfirmed). A campaign whose failures are
// all such trouble found nothing about the kernel: `run` exits 2 then,
// not 1.
func (st *Stats) Blamed() int {
	unconfirmed := map[string]bool{}
	for _, u := range st.Unconfirmed {
		sig, _, _ := strings.Cut(u, ": ")
		unconfirmed[sig] = true
	}
	n := 0
	for sig := range st.SignatureRuns {
		if !unconfirmed[sig] {
			n++
		}
	}
	return n
}

// CameBack reports whether verdict v shows the failure of signature sig
// again, and as which signature. A hang comes back as any hang: an
// executor that gave no answer, a VM that sent nothing, or the kernel's
// own report of one (kernel-hang/INFO-...). Which of them a run shows
// depends on where the guest stalled and what still answered, and every
// one is the program not finishing in the time it got (a replay that
// decides a hang gets twice the time the hung run had). A content
// finding known by digest only (ORACLE:digest:KIND: its run's views held
// no words there) comes back as any content finding on the same kind of
// page (digestBack), which replays, run with every word, name by what
// the page held.
func CameBack(sig string, v *judge.Verdict) (bool, string) {
	if v == nil {
		return false, ""
	}
	if v.Has(sig) {
		return true, sig
	}
	if isDigest(sig) {
		for _, is := range v.Issues {
			if digestBack(sig, is.Signature) {
				return true, is.Signature
			}
		}
		return false, ""
	}
	if _, hang := HarnessTrouble(sig); !hang {
		return false, ""
	}
	for _, is := range v.Issues {
		if anyHang(is.Signature) {
			return true, is.Signature
		}
	}
	return false, ""
}

// anyHang: sig is a hang, the harness's (HarnessTrouble) or one the
// kernel reported.
func anyHang(sig string) bool {
	if _, hang := HarnessTrouble(sig); hang {
		return true
	}
	return oracle.FromSignature(sig) == oracle.KernelHang
}
