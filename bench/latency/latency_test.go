package latency

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/forkfuzz/forkfuzz/agents/executor"
)

func TestParseSeries(t *testing.T) {
	s, err := ParseSeries("vm-async=vm,kernel=/k/bz,pages=thp,memory=2048,write=/sys/fs/cgroup/memory.async_fork:1,cmdline=async_fork.seq_fix=1,cmdline=quiet")
	if err != nil {
		t.Fatal(err)
	}
	if s.Target != "vm" || s.Kernel != "/k/bz" || !s.THP || s.Memory != 2048 || len(s.Writes) != 1 || s.Writes[0].Value != "1" || s.Cmdline != "async_fork.seq_fix=1 quiet" {
		t.Errorf("parsed %+v", s)
	}
	if s, err := ParseSeries("p=native,pin=64K"); err != nil || s.PinBytes != 64<<10 || pages(s) != "4k+pin 64K" {
		t.Errorf("pin=64K: %+v, %v", s, err)
	}
	for _, bad := range []string{"x", "=native", "a=qemu", "a=vm", "a=native,pages=2m", "a=native,kernel=/k", "a=native,foo=1", "a=vm,kernel=/k,memory=12", "a=native,write=x", "a=native,cmdline=x", "a=native,pin=100", "a=native,pin=x"} {
		if _, err := ParseSeries(bad); err == nil {
			t.Errorf("ParseSeries(%q) accepted", bad)
		}
	}
	for in, want := range map[string]int64{"4M": 4 << 20, "1G": 1 << 30, "512k": 512 << 10, "2MiB": 2 << 20, "4096": 4096} {
		if n, err := ParseSize(in); err != nil || n != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	if _, err := ParseSize("-1M"); err == nil {
		t.Error("ParseSize(-1M) accepted")
	}
}

func fake(name string, forkMs ...float64) Result {
	r := Result{Series: Series{Name: name}, Resp: Response{Sizes: []int64{4 << 20, 64 << 20}}}
	for _, f := range forkMs {
		r.Resp.Samples = append(r.Resp.Samples, []executor.ForkBenchSample{
			{Fork: int64(f * 1e6), StallTotal: 1000}, {Fork: int64(f * 2e6), StallTotal: 2000}, {Fork: int64(f * 0.5e6), StallTotal: 500}})
	}
	return r
}

func TestStatAndGate(t *testing.T) {
	res := []Result{fake("base", 1, 10), fake("fast", 1, 5), fake("slow", 1, 30)}
	st := StatOf(res[0].Resp.Samples[1], Metrics[0])
	if st.Min != 5e6 || st.Median != 10e6 || st.Max != 20e6 {
		t.Errorf("stat %+v", st)
	}
	fails, err := Gate(res, 0, nil, 64<<20, Metrics[0], 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(fails) != 1 || fails[0].Series != "slow" || fails[0].Ratio != 3 {
		t.Errorf("gate: %+v", fails)
	}
	if fails, _ := Gate(res, 0, []string{"fast"}, 64<<20, Metrics[0], 2); len(fails) != 0 {
		t.Errorf("gate on fast only: %+v", fails)
	}
	if fails, _ := Gate(res, 0, nil, 4<<20, Metrics[0], 2); len(fails) != 0 {
		t.Errorf("gate at 4M: %+v", fails)
	}
	if _, err := Gate(res, 0, nil, 8<<20, Metrics[0], 2); err == nil {
		t.Error("gate at an unmeasured size accepted")
	}
	var tab, csv, svg bytes.Buffer
	WriteTable(&tab, res, 0)
	if !strings.Contains(tab.String(), "3.00") {
		t.Errorf("table has no 3.00 ratio:\n%s", tab.String())
	}
	if err := WriteCSV(&csv, res); err != nil || strings.Count(csv.String(), "\n") != 1+3*2*3 {
		t.Errorf("csv (%v):\n%s", err, csv.String())
	}
	if err := BenchPlot(res, 0, []string{"note <&>"}).WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	checkXML(t, svg.Bytes())
	if n := strings.Count(svg.String(), "<polyline"); n != 3+3+2 {
		t.Errorf("svg has %d lines, want 8", n)
	}
}

func checkXML(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
	}
}
