package lanes

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gpuportal/gpuportal/core/memest"
)

// laneJob is a job of the one-lane driver: n iterations of iterS seconds.
type laneJob struct {
	id        int64
	iterS     float64
	n         int
	durationS float64 // declared, for srtf; 0 unknown
}

// runOneLane puts the jobs in one lane of a 10 MiB GPU (P 1, E 5 each: the
// first opens the lane, the rest find no room for their own), lets each
// ask for its next iteration as soon as the last one ends, and returns
// the order of the grants and each job's finish time.
func runOneLane(t *testing.T, pol Policy, jobs []laneJob) (order []int64, done map[int64]float64) {
	t.Helper()
	g := mustGPU(t, 10, noPad(pol))
	left := map[int64]int{}
	iter := map[int64]float64{}
	for _, j := range jobs {
		jj := job(j.id, 1, 5)
		jj.DurationS = j.durationS
		if p := mustAdmit(t, g, jj); p.Lane != 1 {
			t.Fatalf("job %d in lane %d, want all in lane 1", j.id, p.Lane)
		}
		left[j.id], iter[j.id] = j.n, j.iterS
		if err := g.Request(j.id, 0); err != nil {
			t.Fatal(err)
		}
	}
	done = map[int64]float64{}
	now := 0.0
	for len(done) < len(jobs) {
		grants := g.Grant(now)
		if len(grants) != 1 {
			t.Fatalf("t=%v: %d grants on one lane, want 1", now, len(grants))
		}
		id := grants[0].Job
		order = append(order, id)
		now += iter[id]
		if _, err := g.Finish(id, now, 0); err != nil {
			t.Fatal(err)
		}
		if left[id]--; left[id] == 0 {
			done[id] = now
			if err := g.Release(id); err != nil {
				t.Fatal(err)
			}
		} else if err := g.Request(id, 0); err != nil {
			t.Fatal(err)
		}
		if err := g.Check(); err != nil {
			t.Fatal(err)
		}
	}
	return order, done
}

// TestIterationPolicies: three jobs share one lane. A runs 3 iterations of
// 2 s, B one of 1 s, C two of 1 s; all are ready at 0 and ask again as
// soon as an iteration ends. The orders are derived by hand:
//
//   - pack: A is first and always ready: A A A (0-6), then B (6-7), C C (7-9).
//   - fair: at 0 all have 0 s: A (0-2). At 2, B and C have 0: B (2-3), done.
//     At 3, C (0 s) before A (2 s): C (3-4); at 4, C (1 s) before A: C
//     (4-5), done. A runs 5-7 and 7-9.
//   - srtf, durations declared (A 6, B 1, C 2): B (0-1), C C (1-3), A (3-9).
//   - srtf, C undeclared: C never wins while A is ready: B (0-1), A A A
//     (1-7), C C (7-9).
func TestIterationPolicies(t *testing.T) {
	a, b, c := laneJob{1, 2, 3, 6}, laneJob{2, 1, 1, 1}, laneJob{3, 1, 2, 2}
	cUnknown := c
	cUnknown.durationS = 0
	cases := []struct {
		name      string
		pol       Policy
		jobs      []laneJob
		wantOrder []int64
		wantDone  map[int64]float64
	}{
		{"pack runs in arrival order", Pack, []laneJob{a, b, c}, []int64{1, 1, 1, 2, 3, 3}, map[int64]float64{1: 6, 2: 7, 3: 9}},
		{"fair runs the least GPU time first", Fair, []laneJob{a, b, c}, []int64{1, 2, 3, 3, 1, 1}, map[int64]float64{1: 9, 2: 3, 3: 5}},
		{"srtf runs the shortest remaining first", SRTF, []laneJob{a, b, c}, []int64{2, 3, 3, 1, 1, 1}, map[int64]float64{1: 9, 2: 1, 3: 3}},
		{"srtf never picks an unknown job over a known one", SRTF, []laneJob{a, b, cUnknown}, []int64{2, 1, 1, 1, 3, 3}, map[int64]float64{1: 7, 2: 1, 3: 9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			order, done := runOneLane(t, tc.pol, tc.jobs)
			if !slices.Equal(order, tc.wantOrder) || fmt.Sprint(done) != fmt.Sprint(tc.wantDone) {
				t.Fatalf("order %v done %v, want %v %v", order, done, tc.wantOrder, tc.wantDone)
			}
		})
	}
}

// TestPackIsWorkConserving: the first job is not ready, so the second
// runs instead of the lane idling.
func TestPackIsWorkConserving(t *testing.T) {
	g := mustGPU(t, 10, noPad(Pack))
	mustAdmit(t, g, job(1, 1, 5))
	mustAdmit(t, g, job(2, 1, 5))
	if err := g.Request(2, 0); err != nil {
		t.Fatal(err)
	}
	got := g.Grant(0)
	if len(got) != 1 || got[0].Job != 2 {
		t.Fatalf("grants %+v, want job 2", got)
	}
	if err := g.Request(1, 0); err != nil {
		t.Fatal(err)
	}
	if got := g.Grant(0.5); len(got) != 0 {
		t.Fatalf("granted %+v while job 2 runs in the lane", got)
	}
}

// TestLanesRunConcurrently: two lanes, two grants at once.
func TestLanesRunConcurrently(t *testing.T) {
	g := mustGPU(t, 20, noPad(Pack))
	mustAdmit(t, g, job(1, 1, 5))
	mustAdmit(t, g, job(2, 1, 5))
	for _, id := range []int64{1, 2} {
		if err := g.Request(id, 0); err != nil {
			t.Fatal(err)
		}
	}
	got := g.Grant(3)
	want := []Grant{{Lane: 1, Job: 1, Start: 3, LaneJobs: 1}, {Lane: 2, Job: 2, Start: 3, LaneJobs: 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("grants %+v, want %+v", got, want)
	}
}

// TestSRTFByIterations: without a declared duration, srtf estimates from
// declared iterations and the measured mean iteration time.
func TestSRTFByIterations(t *testing.T) {
	g := mustGPU(t, 10, noPad(SRTF))
	a, b := job(1, 1, 5), job(2, 1, 5)
	a.Iterations, b.Iterations = 10, 3
	mustAdmit(t, g, a)
	mustAdmit(t, g, b)
	// One iteration each: A takes 1 s (9 left: 9 s), B takes 4 s (2 left: 8 s).
	for _, s := range []struct {
		id  int64
		len float64
	}{{1, 1}, {2, 4}} {
		if err := g.Request(s.id, 0); err != nil {
			t.Fatal(err)
		}
		gr := g.Grant(0)
		if len(gr) != 1 || gr[0].Job != s.id {
			t.Fatalf("grants %+v, want job %d", gr, s.id)
		}
		if _, err := g.Finish(s.id, s.len, 0); err != nil {
			t.Fatal(err)
		}
	}
	g.Request(1, 0)
	g.Request(2, 0)
	if gr := g.Grant(5); len(gr) != 1 || gr[0].Job != 2 {
		t.Fatalf("grants %+v, want job 2 (8 s left against 9 s)", gr)
	}
}

// TestOnlineCorrection checks the E correction from measured peaks.
func TestOnlineCorrection(t *testing.T) {
	t.Run("E waits for MinSamples peaks, then becomes their padded average", func(t *testing.T) {
		g := mustGPU(t, 200, Config{})
		mustAdmit(t, g, job(1, 10, 100)) // P' 11, E' ceil(111 x 1.05) - 11 = 106
		for i, peak := range []int64{56, 60, 64} {
			if e, _ := g.Held(1); e.EphemeralMiB != 106 {
				t.Fatalf("after %d peaks E %d, want the admitted 106", i, e.EphemeralMiB)
			}
			iterate(t, g, 1, float64(i), peak)
		}
		// mean 60: ceil((11 + 60) x 1.05) - 11 = 64
		if e, _ := g.Held(1); e.EphemeralMiB != 64 || e.Source != memest.Measured || laneSizes(g)[1] != 64 {
			t.Fatalf("held %+v, lanes %v; want E 64 measured", e, laneSizes(g))
		}
	})
	t.Run("E never drops below the largest peak seen", func(t *testing.T) {
		g := mustGPU(t, 200, noPad(Pack))
		mustAdmit(t, g, job(1, 10, 100))
		for i, peak := range []int64{60, 90, 60} {
			iterate(t, g, 1, float64(i), peak)
		}
		if e, _ := g.Held(1); e.EphemeralMiB != 90 { // mean 70, largest 90
			t.Fatalf("E %d, want 90", e.EphemeralMiB)
		}
	})
	t.Run("a lane that cannot grow keeps its size and says so", func(t *testing.T) {
		g := mustGPU(t, 99, Config{})
		mustAdmit(t, g, job(1, 0, 90)) // E' = ceil(90 x 1.05) = 95, free 4
		var f Finished
		for i := range 3 {
			f = iterate(t, g, 1, float64(i), 95) // padded mean 100 > 95 + 4
		}
		if !f.Tight || f.Exceeded || f.EphemeralMiB != 95 || g.Check() != nil {
			t.Fatalf("finished %+v", f)
		}
	})
	t.Run("a peak above the lane is reported and stops the job", func(t *testing.T) {
		g := mustGPU(t, 100, noPad(Pack))
		mustAdmit(t, g, job(1, 10, 50))
		f := iterate(t, g, 1, 0, 70)
		if !f.Exceeded || f.Requeue.EphemeralMiB != 70 || f.Requeue.PersistentMiB != 10 || f.Requeue.Source != memest.Measured {
			t.Fatalf("finished %+v", f)
		}
		if err := g.Request(1, 0); !errors.Is(err, ErrExceedsLane) {
			t.Fatalf("request after exceeding: %v", err)
		}
	})
	t.Run("an expected E above the lane grows it where the GPU has room", func(t *testing.T) {
		g := mustGPU(t, 100, noPad(Pack))
		mustAdmit(t, g, job(1, 10, 50))
		if err := g.Request(1, 90); err != nil {
			t.Fatalf("request: %v", err)
		}
		if v := g.View(); v.Lanes[0].SizeMiB != 90 {
			t.Fatalf("lane %+v, want it grown to 90", v.Lanes[0])
		}
		if err := g.Check(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("an expected E the lane cannot grow to is refused", func(t *testing.T) {
		g := mustGPU(t, 100, noPad(Pack))
		mustAdmit(t, g, job(1, 10, 50))
		if err := g.Request(1, 91); !errors.Is(err, ErrExceedsLane) {
			t.Fatalf("request: %v", err)
		}
		if v := g.View(); v.Lanes[0].SizeMiB != 50 {
			t.Fatalf("lane %+v, want it left at 50", v.Lanes[0])
		}
	})
	t.Run("the correction never shrinks a lane below the job's ask", func(t *testing.T) {
		g := mustGPU(t, 1000, noPad(Pack))
		mustAdmit(t, g, job(1, 10, 400))
		for i := range 5 {
			if err := g.Request(1, 400); err != nil {
				t.Fatalf("iteration %d: %v", i, err)
			}
			g.Grant(float64(i))
			if f, err := g.Finish(1, float64(i)+1, 100); err != nil || f.Exceeded || f.EphemeralMiB != 400 {
				t.Fatalf("iteration %d: %+v, %v; want E kept at the ask, 400", i, f, err)
			}
		}
	})
}

// iterate runs one iteration of job id from at to at+1 with a peak.
func iterate(t *testing.T, g *GPU, id int64, at float64, peak int64) Finished {
	t.Helper()
	if err := g.Request(id, 0); err != nil {
		t.Fatal(err)
	}
	if gr := g.Grant(at); len(gr) != 1 || gr[0].Job != id {
		t.Fatalf("grants %+v", gr)
	}
	f, err := g.Finish(id, at+1, peak)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestIterationErrors checks the misuse that Request and Finish refuse.
func TestIterationErrors(t *testing.T) {
	g := mustGPU(t, 10, noPad(Pack))
	mustAdmit(t, g, job(1, 1, 2))
	if _, err := g.Finish(1, 1, 0); !errors.Is(err, ErrNotRunning) {
		t.Errorf("finish without a grant: %v", err)
	}
	if err := g.Request(9, 0); !errors.Is(err, ErrUnknownJob) {
		t.Errorf("unknown job: %v", err)
	}
	g.Request(1, 0)
	g.Grant(5)
	if err := g.Request(1, 0); !errors.Is(err, ErrRunning) {
		t.Errorf("request while running: %v", err)
	}
	if _, err := g.Finish(1, 4, 0); !errors.Is(err, ErrBadInput) {
		t.Errorf("finish before start: %v", err)
	}
}
