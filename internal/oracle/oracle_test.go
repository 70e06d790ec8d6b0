package oracle

import (
	"testing"

	"github.com/forkfuzz/forkfuzz/kernel/report"
)

func TestTable(t *testing.T) {
	seen := map[Name]bool{}
	for _, in := range Table {
		if seen[in.Name] {
			t.Errorf("%s twice", in.Name)
		}
		seen[in.Name] = true
		if in.Doc == "" || in.Judges.String() == "" {
			t.Errorf("%s: no doc or unit", in.Name)
		}
	}
	if len(Of(Checker)) != 17 || len(Events()) != 10 {
		t.Fatalf("%d checker oracles, %d event oracles", len(Of(Checker)), len(Events()))
	}
}

func TestFromSignature(t *testing.T) {
	for sig, want := range map[string]Name{
		"snapshot:lost-store:anon-private":             Snapshot,
		"linearizability-unknown:x":                    LinUnknown,
		"executor-hang":                                ExecutorHang,
		"executor-crash":                               ExecutorCrash,
		"kernel-bug/kernel-BUG-in-__copy_page_range":   KernelBug,
		"kernel-hang/VM-hang--no-result":               KernelHang,
		"kernel-lost-connection/lost-connection-to-VM": KernelLostConnection,
		"kernel-page-table-check/x":                    KernelPageTable,
		"pagetable:pmd-rw-not-restored":                PageTable,
	} {
		if got := FromSignature(sig); got != want {
			t.Errorf("FromSignature(%q) = %q, want %q", sig, got, want)
		}
	}
	// Every kind of console report, and a VM's lost connection (the one
	// kind agents/vm adds), has a row.
	for _, k := range []report.Kind{report.Panic, report.Bug, report.Warning, report.KASAN, report.RSS, report.PageTable, report.Hang, "lost-connection"} {
		if _, ok := Lookup(ForKernelReport(string(k))); !ok {
			t.Errorf("report kind %q has no oracle row", k)
		}
	}
}
