package reproc

import (
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/fuzz/prog"
)

// A fork's hold in the C reproducer: the child stays off the CPU while
// the parent runs the next operation, and the reproducer says so (or
// says that the hold did not hold); the verdict is unchanged.
func TestHoldHost(t *testing.T) {
	const text = `forkfuzz v1
region r0 anon-private pages=512
store r0 off=0x0 count=512 stride=0x1000
fork f0 hold=1
store r0 off=0x0 count=8192 stride=0x40
store r0 off=0x8 count=512 stride=0x1000
wait f0
`
	p, err := prog.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	src, err := Translate(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "fork f0 hold=1") {
		t.Fatalf("the reproducer does not carry the hold")
	}
	bin := build(t, src)
	for k := 0; k < 3; k++ {
		code, out := runC(t, bin)
		if code != 0 {
			t.Fatalf("run %d: exit %d:\n%s", k, code, out)
		}
		if !strings.Contains(out, "the child was held off the CPU for 1 operations") {
			t.Fatalf("run %d: the reproducer does not say the hold held:\n%s", k, out)
		}
	}
}
