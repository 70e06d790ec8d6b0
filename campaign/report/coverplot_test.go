package report

import (
	"strings"
	"testing"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign"
)

// TestCampaignPageCoverage: samples that carry kernel coverage get a
// coverage plot; samples without it get a note saying there is none.
func TestCampaignPageCoverage(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	var samples []campaign.Sample
	for i := 0; i < 4; i++ {
		samples = append(samples, campaign.Sample{Time: t0.Add(time.Duration(i*5) * time.Second), Run: "r1", Target: "qemu",
			Elapsed: float64(i * 5), Programs: int64(i * 3), Forks: int64(i * 7), Edges: 1000 + 500*i, ForkMMPCs: 300 + 100*i})
	}
	page := string(CampaignPage(&Campaign{Title: "t", Samples: samples}))
	if !strings.Contains(page, "kernel coverage (KCOV)") || !strings.Contains(page, "kernel edges") {
		t.Fatal("samples with coverage drew no coverage plot")
	}
	if strings.Contains(page, "coverage sampled") {
		t.Fatal("a campaign that collected on every program is said to sample")
	}
	for i := range samples {
		samples[i].CoverEvery = 8
	}
	page = string(CampaignPage(&Campaign{Title: "t", Samples: samples}))
	if !strings.Contains(page, "kernel coverage sampled: one program in 8") {
		t.Fatal("sampled coverage (samples without a rule) is not said to be sampled")
	}
	guided := campaign.Config{CoverEvery: 4}
	for i := range samples {
		samples[i].CoverEvery, samples[i].CoverRule = 4, guided.CoverRule()
	}
	page = string(CampaignPage(&Campaign{Title: "t", Samples: samples}))
	if !strings.Contains(page, "kernel coverage sampled: KCOV on one fresh program in 4 and every corpus mutation") {
		t.Fatal("a guided campaign's sampling rule is not on the page")
	}
	for i := range samples {
		samples[i].Edges, samples[i].ForkMMPCs = 0, 0
	}
	page = string(CampaignPage(&Campaign{Title: "t", Samples: samples}))
	if strings.Contains(page, "kernel coverage (KCOV)") || !strings.Contains(page, "collected no kernel coverage") {
		t.Fatal("samples without coverage: a coverage plot, or no note that there is none")
	}
}
