package agent

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/gate"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/synergy"
)

// fixedCount is an IterationSource that says what it is told.
type fixedCount struct {
	n  int64
	ok bool
}

func (f *fixedCount) Iterations() (int64, bool) { return f.n, f.ok }

func TestFirstIterations(t *testing.T) {
	tests := []struct {
		name        string
		gate, lines fixedCount
		want        int64
		wantOK      bool
	}{
		{"neither has reported", fixedCount{}, fixedCount{}, 0, false},
		{"progress lines only (a job that does not use the gate)", fixedCount{}, fixedCount{7, true}, 7, true},
		{"gate only (a sharing job that prints no progress)", fixedCount{12, true}, fixedCount{}, 12, true},
		{"both: the gate, first in Sources", fixedCount{12, true}, fixedCount{7, true}, 12, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &FirstIterations{Sources: []IterationSource{&tc.gate, &tc.lines}}
			if n, ok := f.Iterations(); n != tc.want || ok != tc.wantOK {
				t.Fatalf("Iterations() = %d, %v; want %d, %v", n, ok, tc.want, tc.wantOK)
			}
		})
	}
	// Once a source has reported, only it is read: counts of different
	// sources never mix in one rate.
	g, lines := &fixedCount{}, &fixedCount{5, true}
	f := &FirstIterations{Sources: []IterationSource{g, lines}}
	if n, _ := f.Iterations(); n != 5 {
		t.Fatalf("first reading %d, want the progress lines' 5", n)
	}
	g.n, g.ok, lines.n = 900, true, 6
	if n, _ := f.Iterations(); n != 6 {
		t.Fatalf("after the gate reported too: %d, want the progress lines' 6", n)
	}
}

// gatedJob iterates through a real gate, each iteration taking longer
// the less CPU its quota gives, up to a saturation point: a sharing job
// whose rate the profiler can only learn from the gate (it prints no
// progress lines).
type gatedJob struct {
	mu       sync.Mutex
	quota    int64
	satMilli int64
	perIter  time.Duration // at saturation
}

func (j *gatedJob) SetCPU(m int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.quota = m
	return nil
}

func (j *gatedJob) iterTime() time.Duration {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.perIter * time.Duration(j.satMilli) / time.Duration(min(max(j.quota, 1), j.satMilli))
}

func (j *gatedJob) run(ctx context.Context, g *gate.Server, id int64) {
	for ctx.Err() == nil {
		if _, _, err := g.Acquire(ctx, id, 0); err != nil {
			return
		}
		time.Sleep(j.iterTime())
		if err := g.Release(id, 0); err != nil {
			return
		}
	}
}

// TestProfileCPUFromGate: a sharing job that prints no progress line is
// profiled from its iterations at the gate, through the same source the
// agent builds (FirstIterations over the gate's count and the progress
// lines), at every step of the quota.
func TestProfileCPUFromGate(t *testing.T) {
	g, err := gate.Listen(gate.Config{Path: filepath.Join(t.TempDir(), "g.sock"), CapacitiesMiB: []int64{16 << 10},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Add(gate.Job{ID: 1, GPUs: []int{0}, Memory: memest.Estimate{PersistentMiB: 100, EphemeralMiB: 100}}); err != nil {
		t.Fatal(err)
	}
	gj := &gatedJob{quota: 1000, satMilli: 2000, perIter: 4 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); gj.run(ctx, g, 1) }()
	defer func() { cancel(); <-done }()

	l := &Local{gate: g}
	gateIters := l.gateIterations(job.Spec{JobID: 1, Sharing: &job.Sharing{}})
	if gateIters == nil {
		t.Fatal("no gate count for a sharing job")
	}
	if l.gateIterations(job.Spec{JobID: 1}) != nil {
		t.Fatal("a gate count for a job that does not share")
	}
	src := &FirstIterations{Sources: []IterationSource{gateIters, &ProgressCounter{}}}
	if !waitProgress(ctx, src, 5*time.Second) {
		t.Fatal("the gate counted no iteration")
	}
	cfg := ProfileConfig{PropMilli: 1000, MaxMilli: 4000, Steps: 4, Warmup: 10 * time.Millisecond, Window: 200 * time.Millisecond}
	p, err := ProfileCPU(ctx, gj, src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("profile from the gate: %+v", p.Points)
	if len(p.Points) != 4 {
		t.Fatalf("points %+v", p.Points)
	}
	// Half the saturation quota gives about half the rate on a quiet
	// machine, but the job's sleeps run long on a busy one, so only a
	// rate at every step is checked here (TestProfileCPUFake checks the
	// curve's shape against a counter that follows the quota exactly).
	for _, pt := range p.Points {
		if !(pt.Rate > 0) {
			t.Errorf("no rate from the gate at %d milli-CPUs (points %+v)", pt.CPUMilli, p.Points)
		}
	}
	c := synergy.MeasuredCurve(p.Points, 1)
	if err := c.Validate(); err != nil || c.At(4) < 0.999 {
		t.Errorf("curve %v (%v): want a valid curve reaching 1", c, err)
	}
}
