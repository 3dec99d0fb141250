package salussim

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/trace"
)

// sharedTraces is where the repository keeps the real traces its tests
// read (testdata/traces/README.md), seen from this package.
const sharedTraces = "../../testdata/traces"

// openbLast6w reads openb-pods.csv and keeps its last 6,183 jobs, the
// ones the Tiresias-format openb-last6w-tiresias.csv was derived from
// (core/trace checks the match), with submit times from the first.
func openbLast6w(t testing.TB) []trace.Job {
	t.Helper()
	path := filepath.Join(sharedTraces, "openb-pods.csv")
	tr, err := trace.ReadFile(path, trace.FormatOpenB)
	if err != nil {
		t.Fatal(err)
	}
	const last6w = 6183
	jobs := append([]trace.Job(nil), tr.Jobs[len(tr.Jobs)-last6w:]...)
	first := jobs[0].Submit
	for i := range jobs {
		jobs[i].Submit -= first
	}
	return jobs
}

// TestOpenB asserts what can be justified on the openb trace; it prints
// nothing. The figures themselves are in docs/salus.md (see the
// benchmark).
func TestOpenB(t *testing.T) {
	jobs := openbLast6w(t)
	// The reference (the Tiresias authors' simulator, fjf, GPUs counted)
	// on the derived trace, from shared/traces/README.md.
	reference := map[int]float64{24: 43820, 32: 32233}
	var work float64
	for _, j := range jobs {
		if fractional(j) {
			work += float64(j.GPUMilli) / 1000 * j.Duration
		} else {
			work += float64(j.GPUs) * j.Duration
		}
	}
	for _, gpus := range []int{24, 32} {
		none := mustRun(t, jobs, Config{GPUs: gpus, Sharing: SharingNone})
		// Without sharing, fractional pods take a whole GPU each, as in
		// the derived trace, and the order is the reference's fjf: the
		// same average JCT, to the second.
		if math.Round(none.AvgJCTS) != reference[gpus] {
			t.Errorf("%d GPUs, none: avg JCT %.1f, the reference's fjf gives %v", gpus, none.AvgJCTS, reference[gpus])
		}
		for _, pol := range []lanes.Policy{lanes.Fair, lanes.SRTF} {
			salus := mustRun(t, jobs, Config{GPUs: gpus, Sharing: SharingSalus, Lanes: lanes.Config{Policy: pol}})
			if salus.Finished != len(jobs) || salus.Shared == 0 {
				t.Fatalf("%d GPUs, salus %s: %d of %d finished, %d shared", gpus, pol, salus.Finished, len(jobs), salus.Shared)
			}
			// The compute the jobs did is the same in both modes.
			for _, r := range []*Result{none, salus} {
				if did := r.ComputeUtilization * float64(gpus) * r.MakespanS; math.Abs(did-work) > 1e-6*work {
					t.Errorf("%d GPUs, %s %s: compute %v, the jobs need %v", gpus, r.Sharing, r.Policy, did, work)
				}
			}
			// Regression guards of the documented figures, not theorems:
			// on this trace, fair and srtf lanes lower the average JCT, and
			// fractional jobs finish sooner, while each GPU busy with a
			// job hosts more than one on average.
			if salus.AvgJCTS >= none.AvgJCTS || salus.AvgJCTFractionalS >= none.AvgJCTFractionalS || salus.JobsPerBusyGPU <= 1 {
				t.Errorf("%d GPUs, salus %s: avg JCT %.0f (fractional %.0f), jobs per busy GPU %.2f; none: %.0f (%.0f)",
					gpus, pol, salus.AvgJCTS, salus.AvgJCTFractionalS, salus.JobsPerBusyGPU, none.AvgJCTS, none.AvgJCTFractionalS)
			}
			// A shared GPU-second does more work: the busy GPU-time falls.
			if salus.GPUUtilization*salus.MakespanS >= none.GPUUtilization*none.MakespanS {
				t.Errorf("%d GPUs, salus %s: busy GPU-time %.0f, none %.0f", gpus, pol,
					salus.GPUUtilization*salus.MakespanS, none.GPUUtilization*none.MakespanS)
			}
		}
	}
}

// TestWholeJobsDoNotShare: with every job asking for whole GPUs, salus
// has nothing to share and must give exactly what none gives.
func TestWholeJobsDoNotShare(t *testing.T) {
	jobs := openbLast6w(t)[:2000]
	for i := range jobs {
		jobs[i].GPUMilli = 1000
	}
	none := mustRun(t, jobs, Config{GPUs: 8, Sharing: SharingNone})
	salus := mustRun(t, jobs, Config{GPUs: 8, Sharing: SharingSalus})
	if none.AvgJCTS != salus.AvgJCTS || salus.Shared != 0 || salus.Iterations != 0 {
		t.Fatalf("none %.3f, salus %.3f (shared %d)", none.AvgJCTS, salus.AvgJCTS, salus.Shared)
	}
}

// TestAmpleGPUs: the fractional pods alone never need more than 20 GPUs
// at once, so on 24 nothing waits without sharing and every JCT is the
// job's duration, the least possible. Sharing cannot beat that; it can
// only stretch jobs that take turns in a lane.
func TestAmpleGPUs(t *testing.T) {
	var jobs []trace.Job
	var sum float64
	for _, j := range openbLast6w(t) {
		if fractional(j) {
			jobs = append(jobs, j)
			sum += j.Duration
		}
	}
	none := mustRun(t, jobs, Config{GPUs: 24, Sharing: SharingNone})
	if none.AvgQueueS != 0 || math.Abs(none.AvgJCTS-sum/float64(len(jobs))) > 1e-6 {
		t.Fatalf("none: avg queue %v, avg JCT %v, mean duration %v", none.AvgQueueS, none.AvgJCTS, sum/float64(len(jobs)))
	}
	salus := mustRun(t, jobs, Config{GPUs: 24, Sharing: SharingSalus, Lanes: lanes.Config{Policy: lanes.SRTF}})
	if salus.AvgJCTS < none.AvgJCTS-1e-6 || salus.AvgStretch < 1-1e-9 {
		t.Fatalf("salus avg JCT %v below the bound %v (stretch %v)", salus.AvgJCTS, none.AvgJCTS, salus.AvgStretch)
	}
}

// TestBatchedIterations: running a job alone in its lane as one long
// iteration, cut at an iteration boundary when another job joins its
// GPU's lanes or its lanes drain, gives exactly what running it one
// IterationS at a time gives.
func TestBatchedIterations(t *testing.T) {
	jobs := openbLast6w(t)[:1000]
	for _, pol := range lanes.Policies() {
		cfg := Config{GPUs: 8, Sharing: SharingSalus, Lanes: lanes.Config{Policy: pol}}
		run := func(unbatched bool) *Result {
			s, err := newSimulator(jobs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			s.unbatched = unbatched
			if err := s.loop(); err != nil {
				t.Fatal(err)
			}
			return s.result()
		}
		a, b := run(false), run(true)
		if a.AvgJCTS != b.AvgJCTS || a.Merges != b.Merges || a.Spreads != b.Spreads || a.Iterations >= b.Iterations {
			t.Errorf("%s: batched %.6f (%d iterations, %d merges), unbatched %.6f (%d, %d)",
				pol, a.AvgJCTS, a.Iterations, a.Merges, b.AvgJCTS, b.Iterations, b.Merges)
		}
	}
}

func mustRun(t testing.TB, jobs []trace.Job, cfg Config) *Result {
	t.Helper()
	r, err := Run(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
