package sched

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

func TestHandOver(t *testing.T) {
	g := func(node string, i int) gpu.Ref { return gpu.Ref{Node: node, Index: i} }
	starts := []Start{{JobID: 1, GPUs: []gpu.Ref{g("a", 0)}}, {JobID: 2, GPUs: []gpu.Ref{g("a", 1), g("b", 0)}}, {JobID: 3}}
	tests := []struct {
		name string
		held map[gpu.Ref]int64
		now  []int64
		wait string // part of job 2's reason; empty: no wait
	}{
		{"nothing held", nil, []int64{1, 2, 3}, ""},
		{"one GPU of a gang held", map[gpu.Ref]int64{g("b", 0): 9}, []int64{1, 3}, "job 9 has released b:0"},
		{"held elsewhere", map[gpu.Ref]int64{g("c", 0): 9}, []int64{1, 2, 3}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now, waits := HandOver(starts, tc.held)
			var ids []int64
			for _, s := range now {
				ids = append(ids, s.JobID)
			}
			if len(ids) != len(tc.now) {
				t.Fatalf("starts now %v, want %v", ids, tc.now)
			}
			for i := range ids {
				if ids[i] != tc.now[i] {
					t.Fatalf("starts now %v, want %v", ids, tc.now)
				}
			}
			if tc.wait == "" && len(waits) != 0 || tc.wait != "" && (len(waits) != 1 || waits[0].JobID != 2 || !strings.Contains(waits[0].Reason, tc.wait)) {
				t.Errorf("waits %+v, want job 2 waiting for %q", waits, tc.wait)
			}
		})
	}
}

// TestPromises follows one promise: job 9 is kept back on n0:0 and n0:1,
// held by jobs 3 and 4 while they stop; job 7, placed on n0:1 meanwhile,
// is kept back; once 3 and 4 have left, 9's start is due as decided.
func TestPromises(t *testing.T) {
	g0, g1, g2 := gpu.Ref{Node: "n0", Index: 0}, gpu.Ref{Node: "n0", Index: 1}, gpu.Ref{Node: "n0", Index: 2}
	held := map[gpu.Ref]int64{g0: 4, g1: 3}
	starts := []Start{{JobID: 9, GPUs: []gpu.Ref{g0, g1}}, {JobID: 8, GPUs: []gpu.Ref{g2}}}
	now, waits := HandOver(starts, held)
	ps := Promises{}
	ps.Keep(starts, waits, held)
	if len(now) != 1 || now[0].JobID != 8 || len(ps) != 1 || !slices.Equal(ps[9].Victims, []int64{3, 4}) {
		t.Fatalf("now %+v, promises %+v: want 8 started, 9 promised n0:0-1 with victims 3 and 4", now, ps)
	}
	stopping := map[int64]bool{3: true, 4: true}
	isStopping := func(id int64) bool { return stopping[id] }
	waiting := func(id int64) bool { return id != 5 }
	tests := []struct {
		name     string
		left     []int64 // victims that leave before the step
		starts   []Start
		wantNow  []int64
		wantKept []int64
		wantDue  []int64
	}{
		{"another job's start on a promised GPU is kept back", nil, []Start{{JobID: 7, GPUs: []gpu.Ref{g1}}, {JobID: 6, GPUs: []gpu.Ref{g2}}}, []int64{6}, []int64{7}, nil},
		{"the first victim out frees nothing for others", []int64{3}, []Start{{JobID: 7, GPUs: []gpu.Ref{g1}}}, nil, []int64{7}, nil},
		{"once both have left, the start is due as decided", []int64{4}, nil, nil, nil, []int64{9}},
	}
	for _, tc := range tests {
		for _, v := range tc.left {
			delete(stopping, v)
		}
		due := ps.Due(isStopping)
		now, kept := ps.Hold(tc.starts, waiting, isStopping)
		ids := func(ss []Start) []int64 {
			var out []int64
			for _, s := range ss {
				out = append(out, s.JobID)
			}
			return out
		}
		var keptIDs []int64
		for _, w := range kept {
			keptIDs = append(keptIDs, w.JobID)
			if !strings.Contains(w.Reason, "kept for job 9") {
				t.Errorf("%s: reason %q", tc.name, w.Reason)
			}
		}
		if !slices.Equal(ids(now), tc.wantNow) || !slices.Equal(keptIDs, tc.wantKept) || !slices.Equal(ids(due), tc.wantDue) {
			t.Errorf("%s: now %v kept %v due %v; want %v %v %v", tc.name, ids(now), keptIDs, ids(due), tc.wantNow, tc.wantKept, tc.wantDue)
		}
	}
	if len(ps) != 0 {
		t.Errorf("promises left %+v, want none once due", ps)
	}
	// A promise whose job no longer waits is forgotten.
	ps.Keep(starts, waits, held)
	ps[5] = ps[9]
	delete(ps, 9)
	stopping[3] = true
	if now, _ := ps.Hold([]Start{{JobID: 7, GPUs: []gpu.Ref{g1}}}, waiting, isStopping); len(now) != 1 || len(ps) != 0 {
		t.Errorf("now %v, promises %+v: a promise to a job that no longer waits must not keep GPUs", now, ps)
	}
}

// TestPromisedStartSeenRunning: node-0's four GPUs are held by three
// long jobs of queue 2 and by job 4, asked to stop for job 9 (queue 0)
// and still saving its checkpoint; job 9 is promised node-0:3, and a
// long job 7 waits in queue 2, as the preempted-first rule put job 4
// ahead of it. Seen running and waiting, job 4 ranked first of its queue
// and every pass of its grace period preempted another job for job 9.
// Seen as Promises.Present shows them, job 4 leaving without the GPU
// promised, job 9 running there, the pass preempts and starts nothing,
// under every policy; a new job 10 of queue 0 preempts one job, never
// job 4 or job 9. restore gives the jobs back as they were.
func TestPromisedStartSeenRunning(t *testing.T) {
	long := func(j *Job) { served(5000)(j); inQueue(2, 100+float64(j.ID))(j); lasting(9000)(j) }
	jobs := []Job{
		run(1, 0, on("node-0", 0), long),
		run(2, 0, on("node-0", 1), long),
		run(3, 0, on("node-0", 2), long),
		run(4, 0, on("node-0", 3), long, inQueue(2, 50)),
		pend(7, 1, 0, long, inQueue(2, 60)),
		pend(9, 1, 990, lasting(100)),
	}
	ps := Promises{9: {GPUs: on("node-0", 3), Victims: []int64{4}}}
	for _, policy := range []string{"tiresias-l", "tiresias-g", "dlas", "srtf", "fifo"} {
		for _, omit := range []bool{false, true} {
			cfg := Config{Policy: policy, Thresholds: []float64{200, 800}, OmitWaits: omit}
			schedule := func(js []Job) Decisions {
				t.Helper()
				return checked(t, cfg, Snapshot{Now: 1000, Nodes: nodes(4), Jobs: js})
			}
			if policy == "tiresias-l" {
				// As before: job 4 running, job 9 waiting (under a rule
				// that does not move a victim first, srtf, fifo, job 4
				// was chosen again).
				if d := schedule(slices.Clone(jobs)); len(d.Preempts) != 1 || d.Preempts[0].JobID == 4 || d.Preempts[0].For != 9 {
					t.Errorf("%s, job 4 seen running: preempts %+v: want another job preempted for job 9 (the bug)", policy, d.Preempts)
				}
			}
			js := slices.Clone(jobs)
			js[3].State = Leaving
			restore := ps.Present(js, 1000)
			if js[5].State != Running || !slices.Equal(js[5].Placement, on("node-0", 3)) || len(js[3].Placement) != 0 || js[3].GPUs != 0 {
				t.Fatalf("presented: job 9 %v on %v, job 4 on %v (%d GPUs): want 9 running on node-0:3, 4 on nothing", js[5].State, js[5].Placement, js[3].Placement, js[3].GPUs)
			}
			if d := schedule(js); len(d.Preempts)+len(d.Starts) != 0 {
				t.Errorf("%s (omit waits %v): preempts %+v, starts %+v: want nothing while job 4 leaves", policy, omit, d.Preempts, d.Starts)
			}
			withNew := append(slices.Clone(js), pend(10, 1, 995, lasting(50)))
			if d := schedule(withNew); policy != "fifo" && (len(d.Preempts) != 1 || d.Preempts[0].JobID == 4 || d.Preempts[0].JobID == 9 || d.Preempts[0].For != 10) {
				t.Errorf("%s (omit waits %v), job 10 new: preempts %+v: want one of jobs 1-3 preempted for job 10", policy, omit, d.Preempts)
			}
			restore()
			want := slices.Clone(jobs)
			want[3].State = Leaving
			if !slices.EqualFunc(js, want, func(a, b Job) bool {
				return a.State == b.State && slices.Equal(a.Placement, b.Placement) && a.GPUs == b.GPUs && a.LastStartTime == b.LastStartTime
			}) {
				t.Fatalf("restored: %+v\nwant %+v", js, want)
			}
		}
	}
}

// TestLeavingJobIsNeitherStartedNorPreempted: a leaving job holds its
// GPUs, as a running one, and no pass preempts it, not even for a job
// past its reservation's deadline, nor starts it; every other job keeps
// its place.
func TestLeavingJobIsNeitherStartedNorPreempted(t *testing.T) {
	for _, policy := range []string{"tiresias-l", "tiresias-g", "dlas", "srtf", "fifo", "fjf"} {
		jobs := []Job{
			run(1, 0, on("node-0", 0, 1, 2, 3), served(9000), inQueue(2, 10), lasting(20000)),
			pend(2, 4, 10, lasting(100)),
		}
		jobs[0].State = Leaving
		cfg := Config{Policy: policy, Thresholds: []float64{200, 800}, ReserveAfterS: 60}
		d := checked(t, cfg, Snapshot{Now: 5000, Nodes: nodes(4), Jobs: jobs})
		if len(d.Preempts)+len(d.Starts) != 0 {
			t.Errorf("%s: preempts %+v, starts %+v: want none, job 1 leaving holds node-0", policy, d.Preempts, d.Starts)
		}
	}
}

// TestPresentOnlyForWaitingJobs: a promise whose job no longer waits
// (started elsewhere, cancelled: Hold forgets it after the pass) shows
// nothing, and takes no GPU off the leaving job that held its GPUs.
func TestPresentOnlyForWaitingJobs(t *testing.T) {
	jobs := []Job{run(4, 0, on("node-0", 2, 3)), run(9, 0, on("node-0", 0))}
	jobs[0].State = Leaving
	restore := Promises{9: {GPUs: on("node-0", 3), Victims: []int64{4}}}.Present(jobs, 1000)
	if jobs[1].State != Running || !slices.Equal(jobs[1].Placement, on("node-0", 0)) ||
		jobs[0].State != Leaving || !slices.Equal(jobs[0].Placement, on("node-0", 2, 3)) || jobs[0].GPUs != 2 {
		t.Errorf("presented %+v: want both jobs as they were", jobs)
	}
	restore()
}
