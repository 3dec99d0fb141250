package forecast

import (
	"math"
	"slices"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
)

// TestStratified: over the n samples of a forecast, each job draws once
// from each of the n strata of (0, 1), whatever the job (Latin
// hypercube), and a sample beyond n draws as before.
func TestStratified(t *testing.T) {
	for _, n := range []uint64{2, 10, 40} {
		for id := int64(-50); id < 200; id++ {
			seen := make([]bool, n)
			for k := range n {
				u := stratified(DefaultSeed, k, n, id)
				if !(u > 0 && u < 1) {
					t.Fatalf("n %d, job %d, sample %d: draw %v, want within (0, 1)", n, id, k, u)
				}
				s := int(u * float64(n))
				if seen[s] {
					t.Fatalf("n %d, job %d: stratum %d drawn twice", n, id, s)
				}
				seen[s] = true
			}
		}
	}
	if got, want := stratified(DefaultSeed, 10, 10, 7), draw(DefaultSeed, 10, 7); got != want {
		t.Errorf("sample 10 of 10: draw %v, want the independent %v", got, want)
	}
}

// TestForecastLikelyIsTheMiddle: a job waiting for the one GPU, held by a
// job that has just started, starts when that job ends. With the run
// times stratified, the likely start (the median of 10 sampled starts)
// lies between the 40th and 60th percentiles of the run times for every
// job, where the median of 10 independent draws strays past them for
// about half the jobs.
func TestForecastLikelyIsTheMiddle(t *testing.T) {
	var samples []Sample
	for i := range 1000 {
		samples = append(samples, Sample{RunS: float64(i + 1)}) // 1 to 1,000 s
	}
	h := NewHistory(samples, 0)
	f := newForecaster(t, "fifo")
	for id := int64(1); id <= 100; id++ {
		in := Input{Snapshot: sched.Snapshot{Now: now, Nodes: nodes(1, 1),
			Jobs: []sched.Job{running(id, 1, 0, now), waiting(id+1000, 1, now-1)}}, History: h}
		fc, ok := f.Forecast(in).Job(id + 1000)
		if !ok || fc.State != StateExpected {
			t.Fatalf("running job %d: forecast %+v, %v; want expected", id, fc, ok)
		}
		if w := fc.Likely - now; w < 400 || w > 600 {
			t.Errorf("running job %d: likely wait %.0f s, want within the 40th to 60th percentiles of the run times (400 to 600 s)", id, w)
		}
	}
}

// TestRemainingByGPUs: a job's run time is drawn from the jobs on as many
// GPUs before the broader groups, at each level; without a GPU count,
// or with too few such jobs, the groups are as before.
func TestRemainingByGPUs(t *testing.T) {
	var samples []Sample
	for i := range 10 {
		samples = append(samples,
			Sample{User: "alice", Model: "resnet50", GPUs: 1, RunS: 100 + float64(i)},
			Sample{User: "alice", Model: "resnet50", GPUs: 8, RunS: 5000 + float64(i)},
			Sample{User: "bob", Model: "bert", GPUs: 4, RunS: 700 + float64(i)})
	}
	samples = append(samples, Sample{User: "carol", Model: "gpt2", GPUs: 2, RunS: 3}) // one 2-GPU job: too few
	h := NewHistory(samples, 8)
	tests := []struct {
		name string
		job  sched.Job
		want float64
	}{
		{"the user's jobs of the model on 8 GPUs", sched.Job{User: "alice", Model: "resnet50", GPUs: 8}, 5004.5},
		{"the user's jobs of the model on 1 GPU", sched.Job{User: "alice", Model: "resnet50", GPUs: 1}, 104.5},
		{"the user's jobs of the model, any GPUs (none on 2)", sched.Job{User: "alice", Model: "resnet50", GPUs: 2}, (109 + 5000) / 2.0},
		{"the model's jobs on 8 GPUs, another user", sched.Job{User: "dave", Model: "resnet50", GPUs: 8}, 5004.5},
		{"every job on 4 GPUs, another user and model", sched.Job{User: "dave", Model: "vgg", GPUs: 4}, 704.5},
		{"no GPU count: the user's jobs of the model", sched.Job{User: "alice", Model: "resnet50"}, (109 + 5000) / 2.0},
	}
	for _, tc := range tests {
		got, ok := h.Remaining(&tc.job, 0.5)
		if !ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Remaining = %v, %v; want %v", tc.name, got, ok, tc.want)
		}
	}
	k := keys("alice", "", "resnet50", 8)
	if !slices.ContainsFunc(k[:], func(g groupKey) bool { return g.level == byNone && g.gpus == 8 }) {
		t.Errorf("keys %v: want the group of every job on 8 GPUs", k)
	}
}
