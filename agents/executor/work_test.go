package executor

import (
	"testing"
)

// TestWork: a run says where its program phase went, the child's part
// included (it counts into the shared counters from its own process).
func TestWork(t *testing.T) {
	const text = `forkfuzz v1
region r0 anon-private pages=8
store r0 off=0x0 count=2 stride=0x1000
fork f0
f0: store r0 off=0x1000 count=1
f0: check
wait f0
check
`
	for _, tc := range []struct {
		name   string
		opt    Options
		want   []string
		absent []string
	}{
		{"census", Options{}, []string{"store", "fork", "wait", "check", "view", "census"}, nil},
		{"no census", Options{NoForkPages: true}, []string{"store", "fork", "wait", "view"}, []string{"census", "evidence"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, o := run(t, text, tc.opt)
			if o.Work == nil {
				t.Fatal("no Work in the observation")
			}
			for _, k := range tc.want {
				if o.Work[k] <= 0 {
					t.Errorf("Work[%q] = %d, want > 0 (Work: %v)", k, o.Work[k], o.Work)
				}
			}
			for _, k := range tc.absent {
				if _, ok := o.Work[k]; ok {
					t.Errorf("Work has %q = %d, want none (Work: %v)", k, o.Work[k], o.Work)
				}
			}
			// The wait includes the child's run, its views among them.
			if o.Work["wait"] > o.Phases["program"] {
				t.Errorf("wait %d µs exceeds the program phase %d µs", o.Work["wait"], o.Phases["program"])
			}
		})
	}
}
