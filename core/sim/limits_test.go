package sim

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// TestLimitsAsHints: with LimitFactor the scheduler sees limits, not
// durations; srsf then ranks by them only under LimitsAsHints.
func TestLimitsAsHints(t *testing.T) {
	// One GPU; a 1,000 s job and a 10 s job arrive together.
	jobs := []trace.Job{{ID: 1, Submit: 0, Duration: 1000, GPUs: 1}, {ID: 2, Submit: 0, Duration: 10, GPUs: 1}}
	nodes := []trace.Node{{Name: "n", GPUs: 1}}
	tests := []struct {
		name   string
		factor float64
		spread bool
		hints  bool
		avg    float64
	}{
		{"durations known: the short job first", 0, false, false, (10 + 1010) / 2.0},
		{"limits only, not read: arrival order", 5, false, false, (1000 + 1010) / 2.0},
		{"limits read as hints: the short job first", 5, false, true, (10 + 1010) / 2.0},
		{"spread limits read as hints: still far apart", 5, true, true, (10 + 1010) / 2.0},
		{"hints without limits change nothing", 0, false, true, (10 + 1010) / 2.0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Sched: sched.Config{Policy: "srsf", LimitsAsHints: tc.hints, OmitWaits: true}, Nodes: nodes,
				LimitFactor: tc.factor, LimitSpread: tc.spread}
			r, err := Run(context.Background(), jobs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.AvgJCT != tc.avg || r.Finished != 2 {
				t.Errorf("avg JCT %v (%d finished), want %v", r.AvgJCT, r.Finished, tc.avg)
			}
		})
	}
	// A limit the job declared is kept: job 1's 60 s limit ranks it first.
	declared := []trace.Job{{ID: 1, Submit: 0, Duration: 50, GPUs: 1, TimeLimitS: 60}, {ID: 2, Submit: 0, Duration: 10, GPUs: 1}}
	r, err := Run(context.Background(), declared, Config{Sched: sched.Config{Policy: "srsf", LimitsAsHints: true, OmitWaits: true},
		Nodes: nodes, LimitFactor: 10})
	if err != nil {
		t.Fatal(err)
	}
	if want := (50 + 60) / 2.0; r.AvgJCT != want {
		t.Errorf("a declared limit: avg JCT %v, want %v (job 1 first: 60 s bound against 100)", r.AvgJCT, want)
	}
	for _, f := range []float64{0.5, -1} {
		_, err := Run(context.Background(), jobs, Config{Sched: sched.Config{Policy: "srsf"}, Nodes: nodes, LimitFactor: f})
		if err == nil || !strings.Contains(err.Error(), "limit factor") {
			t.Errorf("limit factor %v: err = %v, want it refused", f, err)
		}
	}
}

// priorWatch records the size of the Gittins distribution each pass saw.
type priorWatch struct{ sizes []int }

func (w *priorWatch) Pass(s sched.Snapshot, _ sched.Decisions) {
	n := 0
	if s.GPUTimeDist != nil {
		n = s.GPUTimeDist.Len()
	}
	w.sizes = append(w.sizes, n)
}
func (w *priorWatch) Started(int64, float64)           {}
func (w *priorWatch) Finished(int64, float64, float64) {}

// TestLearnPrior: with LearnPrior every finished job's GPU-time joins the
// distribution the next pass sees, from the shipped prior; without it,
// passes carry none (the scheduler's own, fixed).
func TestLearnPrior(t *testing.T) {
	// One GPU, three jobs in a row: passes at 0, 10 and 30.
	jobs := []trace.Job{{ID: 1, Submit: 0, Duration: 10, GPUs: 1}, {ID: 2, Submit: 0, Duration: 20, GPUs: 1}, {ID: 3, Submit: 0, Duration: 30, GPUs: 1}}
	prior := sched.PriorGPUTimeDist().Len()
	for _, learn := range []bool{false, true} {
		w := &priorWatch{}
		cfg := Config{Sched: sched.Config{Policy: "tiresias-g", OmitWaits: true}, Nodes: []trace.Node{{Name: "n", GPUs: 1}},
			LearnPrior: learn, Observer: w}
		if _, err := Run(context.Background(), jobs, cfg); err != nil {
			t.Fatal(err)
		}
		want := []int{0, 0, 0}
		if learn {
			want = []int{prior, prior + 1, prior + 2}
		}
		if len(w.sizes) != len(want) || w.sizes[0] != want[0] || w.sizes[1] != want[1] || w.sizes[2] != want[2] {
			t.Errorf("learn %v: distribution sizes per pass %v, want %v", learn, w.sizes, want)
		}
	}
}
