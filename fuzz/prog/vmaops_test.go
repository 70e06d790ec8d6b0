package prog

import (
	"fmt"
	"strings"
	"testing"
)

// TestRemapFileRoundTrip: remapfile parses its pgoff (in pages), formats
// back unchanged, and is a Range operation (it changes mappings).
func TestRemapFileRoundTrip(t *testing.T) {
	text := "forkfuzz v1\nregion r0 memfd-shared pages=4 thp=default\nregion r1 anon-shared pages=4 thp=default\n" +
		"remapfile r0 off=0x1000 len=0x2000 pgoff=0x10\nt1: remapfile r1 off=0x0 len=0x1000 pgoff=0x0\nfork f0\nf0: remapfile r0 off=0x0 len=0x1000 pgoff=0x3\nwait f0\njoin t1\n"
	p, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if op := p.Ops[0]; op.Kind != OpRemapFile || op.Region != 0 || op.Off != 0x1000 || op.Len != 0x2000 || op.PgOff != 0x10 {
		t.Fatalf("parsed %+v", op)
	}
	if p.Ops[3].PgOff != 3 || p.Ops[3].Proc != 1 {
		t.Fatalf("parsed %+v", p.Ops[3])
	}
	if got := string(p.Format()); got != text {
		t.Fatalf("Format:\n%s\nwant\n%s", got, text)
	}
	if !OpRemapFile.HasRange() || !OpRemapFile.ChangesVMA() || OpRemapFile.Info().Syscall != "remap_file_pages" {
		t.Errorf("remapfile: %+v", OpRemapFile.Info())
	}
	// The largest pgoff is valid, one more is not.
	if _, err := Parse([]byte(fmt.Sprintf("forkfuzz v1\nregion r0 memfd-shared pages=4\nremapfile r0 off=0x0 len=0x1000 pgoff=%#x\n", MaxPgOff))); err != nil {
		t.Errorf("pgoff MaxPgOff: %v", err)
	}
}

func TestRemapFileErrors(t *testing.T) {
	const head = "forkfuzz v1\nregion r0 memfd-shared pages=4\n"
	for _, c := range []struct{ text, want string }{
		{"remapfile r0 off=0x0 len=0x1000\n", "missing argument pgoff"},
		{"remapfile r0 off=0x0 pgoff=0x1\n", "missing argument len"},
		{"remapfile r0 off=0x0 len=0x1000 pgoff=zz\n", "3:39: bad number"},
		{"remapfile r0 off=0x0 len=0x1000 pgoff=0x1 advice=cold\n", "3:43: unknown argument \"advice\""},
		{fmt.Sprintf("remapfile r0 off=0x0 len=0x1000 pgoff=%#x\n", MaxPgOff+1), "pgoff 0x10001 past the limit 0x10000"},
		{"remapfile r0 off=0x8000000 len=0x1000 pgoff=0x1\n", "runs past the region span"},
		{"remapfile r1 off=0x0 len=0x1000 pgoff=0x1\n", "r1"},
	} {
		_, err := Parse([]byte(head + c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
}
