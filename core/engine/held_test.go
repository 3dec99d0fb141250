package engine

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/accounting"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/sched"
)

// TestSharedAttainedService: jobs that share a GPU attain the share of it
// they hold (issue 36: "Attained service 120 GPU-s" over 2 minutes on
// half a GPU), as accounting counts the same runs, and a job left alone
// on the GPU attains it whole from the moment the others left.
func TestSharedAttainedService(t *testing.T) {
	est := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000, Source: memest.Declared}
	var jobs []Job
	for id := int64(1); id <= 5; id++ {
		jobs = append(jobs, Job{ID: id, Team: "nlp", User: "alice", GPUs: 1, Sharing: true, Memory: est,
			Command: []string{"train"}, SubmittedAt: t0})
	}
	// A whole-GPU job on the other GPU attains it whole.
	jobs = append(jobs, Job{ID: 6, Team: "nlp", User: "bob", GPUs: 1, Command: []string{"train"}, SubmittedAt: t0.Add(time.Second)})
	store := newMemStore(jobs...)
	n := newFakeNode("n1", 2)
	e, clock := newTestEngine(t, store, n)
	sc, err := sched.New(sched.Config{Policy: "fifo", Placement: sched.PlaceNodes})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	ctx := context.Background()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	end := func(id int64, s int) {
		clock.t = at(s)
		delete(n.running, id)
		e.testExit(ctx, exit("n1", id, 0, at(s)))
	}

	mustPass(t, e) // t0: all start; 1 to 5 on one GPU
	for id := int64(1); id <= 6; id++ {
		if store.state(id) != "running" {
			t.Fatalf("job %d %s, want running", id, store.state(id))
		}
	}
	if g := store.jobs[1].Placement[0]; store.jobs[5].Placement[0] != g || store.jobs[6].Placement[0] == g {
		t.Fatalf("placements %v, %v, %v: want 1 to 5 on one GPU, 6 on the other", g, store.jobs[5].Placement, store.jobs[6].Placement)
	}
	clock.t = at(30)
	mustPass(t, e) // sees five on the GPU since t0: a fifth each
	for id := int64(2); id <= 5; id++ {
		end(id, 100)
	}
	clock.t = at(110)
	mustPass(t, e) // sees job 1 alone since t0+100
	snap, _ := e.snapshot(mustJobs(t, store), at(130))
	if got := attainedOf(snap, 1); !near(got, 100.0/5+30) {
		t.Errorf("job 1's attained service in the pass at t0+130: %v, want 20 + 30 alone", got)
	}
	end(1, 160)
	end(6, 160)

	want := map[int64]float64{1: 100.0/5 + 60, 2: 20, 3: 20, 4: 20, 5: 20, 6: 160}
	var runs []accounting.Run
	for id, w := range want {
		j := store.jobs[id]
		if !near(j.AttainedService, w) {
			t.Errorf("job %d attained %v GPU-seconds, want %v", id, j.AttainedService, w)
		}
		start, stop := at(0), at(100)
		if id == 1 || id == 6 {
			stop = at(160)
		}
		runs = append(runs, accounting.Run{Job: id, Team: j.Team, User: j.User, GPUs: []string{j.Placement[0].String()},
			Sharing: j.Sharing, Start: start, End: &stop})
	}
	// Accounting counts the same runs the same.
	days := accounting.Measure(runs, nil, t0.Truncate(24*time.Hour), t0.Truncate(24*time.Hour).AddDate(0, 0, 2), at(200), 0.05)
	alloc := make(map[string]float64)
	for _, byKey := range days {
		for k, u := range byKey {
			alloc[k.User] += u.Allocated
		}
	}
	if !near(alloc["alice"], 160) || !near(alloc["bob"], 160) {
		t.Errorf("accounting: alice %v, bob %v GPU-seconds, want 160 each (the sum of their jobs' attained service)", alloc["alice"], alloc["bob"])
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func attainedOf(snap sched.Snapshot, id int64) float64 {
	for _, j := range snap.Jobs {
		if j.ID == id {
			return j.AttainedService
		}
	}
	return math.NaN()
}

// TestSharingRunEndedBeforeAPass: a sharing run that ends before any pass
// after its start has attained its share of the GPU as it stood at the
// start, not the GPU whole: half a GPU asked for (gpu_fraction), and an
// equal part of a GPU shared with another job (issue 36).
func TestSharingRunEndedBeforeAPass(t *testing.T) {
	est := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000, Source: memest.Declared}
	for _, tc := range []struct {
		name string
		jobs []Job
		want map[int64]float64 // GPU-seconds after 40 s
	}{
		{"a fraction, alone", []Job{{ID: 1, GPUFraction: 0.5}}, map[int64]float64{1: 20}},
		{"a quarter and an equal part", []Job{{ID: 1, GPUFraction: 0.25}, {ID: 2}}, map[int64]float64{1: 10, 2: 20}},
		{"two equal parts", []Job{{ID: 1}, {ID: 2}}, map[int64]float64{1: 20, 2: 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.jobs {
				j := &tc.jobs[i]
				j.Team, j.User, j.GPUs, j.Sharing, j.Memory, j.Command, j.SubmittedAt = "nlp", "alice", 1, true, est, []string{"train"}, t0
			}
			store := newMemStore(tc.jobs...)
			n := newFakeNode("n1", 1)
			e, clock := newTestEngine(t, store, n)
			sc, err := sched.New(sched.Config{Policy: "fifo", Placement: sched.PlaceNodes})
			if err != nil {
				t.Fatal(err)
			}
			e.cfg.Scheduler = sc
			ctx := context.Background()
			mustPass(t, e) // t0: they start on the one GPU
			clock.t = t0.Add(40 * time.Second)
			for id := range tc.want {
				if store.state(id) != "running" {
					t.Fatalf("job %d %s, want running", id, store.state(id))
				}
				delete(n.running, id)
				e.testExit(ctx, exit("n1", id, 0, clock.t))
			}
			for id, w := range tc.want {
				if got := store.jobs[id].AttainedService; !near(got, w) {
					t.Errorf("job %d attained %v GPU-seconds in 40 s, want %v", id, got, w)
				}
			}
		})
	}
}
