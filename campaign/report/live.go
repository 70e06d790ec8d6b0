package report

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/forkfuzz/forkfuzz/campaign"
)

// Snapshot is what a live page polls: the campaign's counts so far (one
// Sample, appended to the workdir's stats file), its agents and status
// lines.
type Snapshot struct {
	Sample campaign.Sample
	Agents []AgentRow
	Status []string
}

// Live serves the campaign page of a workdir while a campaign runs,
// sampling Poll every Every.
type Live struct {
	Workdir string
	Title   string
	Poll    func(ctx context.Context) (*Snapshot, error)
	Every   time.Duration // default campaign.StatsEvery
	// Refresh is how often the page reloads itself (seconds; default 5).
	Refresh int

	mu       sync.Mutex
	last     *Snapshot
	err      error
	writeErr error // the last sample's append to the stats file
}

// Run polls until ctx ends.
func (l *Live) Run(ctx context.Context) {
	every := l.Every
	if every <= 0 {
		every = campaign.StatsEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		l.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (l *Live) poll(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := l.Poll(pctx)
	l.mu.Lock()
	l.err = err
	if err == nil {
		l.last = s
	}
	l.mu.Unlock()
	if err != nil || s == nil || s.Sample.Run == "" || l.Workdir == "" {
		return
	}
	err = campaign.AppendSample(l.Workdir, s.Sample)
	l.mu.Lock()
	l.writeErr = err
	l.mu.Unlock()
}

// ServeHTTP serves the page at / and the finding directories under
// /findings/.
func (l *Live) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" && r.URL.Path != "/"+CampaignHTML {
		http.StripPrefix("/findings/", http.FileServer(http.Dir(filepath.Join(l.Workdir, "findings")))).ServeHTTP(w, r)
		return
	}
	c, err := LoadCampaign(l.Workdir)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if l.Title != "" {
		c.Title = l.Title
	}
	c.Refresh = l.Refresh
	if c.Refresh <= 0 {
		c.Refresh = 5
	}
	l.mu.Lock()
	if l.last != nil {
		c.Agents, c.Status = l.last.Agents, l.last.Status
	}
	if l.err != nil {
		c.Status = append(c.Status, "last poll failed: "+l.err.Error())
	}
	if l.writeErr != nil {
		c.Status = append(c.Status, "last sample not written: "+l.writeErr.Error())
	}
	l.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(CampaignPage(c))
}

// Serve polls and serves on addr until ctx ends, and returns the address
// it listens on.
func (l *Live) Serve(ctx context.Context, addr string) (string, error) {
	if l.Workdir != "" {
		if err := os.MkdirAll(filepath.Join(l.Workdir, "findings"), 0o755); err != nil {
			return "", fmt.Errorf("http: %w", err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("http: %w", err)
	}
	srv := &http.Server{Handler: l, ReadHeaderTimeout: 5 * time.Second}
	go l.Run(ctx)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err
		}
	}()
	return ln.Addr().String(), nil
}
