package sched

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// shareMiB is the memory of the GPUs in the sharing tests: 16 GiB.
const shareMiB = 16384

// shareNodes returns nodes of n GPUs of 16 GiB each.
func shareNodes(sizes ...int) []Node {
	out := nodes(sizes...)
	for i := range out {
		for k := range out[i].GPUs {
			out[i].GPUs[k].MemMiB = shareMiB
		}
	}
	return out
}

// shares makes a job a sharing one with padded P and E in MiB.
func shares(p, e int64) func(*Job) {
	return func(j *Job) { j.Sharing, j.MemPersistentMiB, j.MemEphemeralMiB = true, p, e }
}

// withService gives a job attained service (and run time) and a start.
func withService(gs float64) func(*Job) {
	return func(j *Job) { j.AttainedService, j.ExecutedS, j.LastStartTime = gs, gs, j.SubmitTime }
}

func byUser(u string) func(*Job) { return func(j *Job) { j.User = u } }

// TestCoLocation: where a sharing job starts, and where whole-GPU jobs do.
func TestCoLocation(t *testing.T) {
	n0 := func(idx ...int) []gpu.Ref { return on("node-0", idx...) }
	cases := []struct {
		name     string
		policy   string
		share    string // Config.SharePlacement
		nodes    []Node
		jobs     []Job
		teams    []Team
		starts   map[int64][]gpu.Ref // exactly these start
		preempts []int64
		wait     map[int64]string // job -> substring of its reason
	}{
		{
			name: "free-first: takes a free GPU rather than join a shared one", policy: "fjf", nodes: shareNodes(2),
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 6000)),
				pend(2, 1, 10, shares(1000, 4000)),
			},
			starts: map[int64][]gpu.Ref{2: n0(1)},
		},
		{
			name: "fullest-first: joins a shared GPU rather than an empty one", policy: "fjf", nodes: shareNodes(2),
			share: ShareFullestFirst,
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 6000)),
				pend(2, 1, 10, shares(1000, 4000)),
			},
			starts: map[int64][]gpu.Ref{2: n0(0)},
		},
		{
			name: "free-first: joins a shared GPU when no GPU is free", policy: "fjf", nodes: shareNodes(2),
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 6000)),
				run(2, 0, n0(1)),
				pend(3, 1, 10, shares(1000, 4000)),
			},
			starts: map[int64][]gpu.Ref{3: n0(0)},
		},
		{
			// Two GPUs free, and job 4 (after it in the order) needs both:
			// job 3 joins job 1's GPU, so job 4 starts in the same pass.
			name: "free-first: joins a shared GPU when whole-GPU jobs wait for the free ones", policy: "fjf", nodes: shareNodes(3),
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 6000)),
				pend(3, 1, 10, shares(1000, 4000)),
				pend(4, 2, 20),
			},
			starts: map[int64][]gpu.Ref{3: n0(0), 4: n0(1, 2)},
		},
		{
			// Job 3 (first in the order) needs 3 GPUs and waits: the free
			// GPU is kept for it.
			name: "free-first: joins a shared GPU when a whole-GPU job before it waits", policy: "fjf", nodes: shareNodes(3),
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 6000)),
				run(2, 0, n0(1)),
				pend(3, 3, 10),
				pend(4, 1, 20, shares(1000, 4000)),
			},
			starts: map[int64][]gpu.Ref{4: n0(0)},
			wait:   map[int64]string{3: "needs 3 GPUs"},
		},
		{
			// Job 4 needs one GPU and two are free: one is left for it.
			name: "free-first: takes a free GPU when more are free than whole-GPU jobs wait for", policy: "fjf", nodes: shareNodes(3),
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 6000)),
				pend(3, 1, 10, shares(1000, 4000)),
				pend(4, 1, 20),
			},
			starts: map[int64][]gpu.Ref{3: n0(1), 4: n0(2)},
		},
		{
			name: "free-first: a whole-GPU job too large for the cluster keeps no GPU", policy: "fjf", nodes: shareNodes(2),
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 6000)),
				pend(3, 1, 10, shares(1000, 4000)),
				pend(4, 3, 20),
			},
			starts: map[int64][]gpu.Ref{3: n0(1)},
			wait:   map[int64]string{4: "3 GPUs"},
		},
		{
			// Job 4 opted in but asks for two GPUs: it takes whole ones.
			name: "free-first: a sharing job on two GPUs waits as a whole-GPU job", policy: "fjf", nodes: shareNodes(3),
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 6000)),
				pend(3, 1, 10, shares(1000, 4000)),
				pend(4, 2, 20, shares(1000, 1000)),
			},
			starts: map[int64][]gpu.Ref{3: n0(0), 4: n0(1, 2)},
		},
		{
			name: "free-first: no room on the shared GPU: takes a free one though whole-GPU jobs wait", policy: "fjf", nodes: shareNodes(3),
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 14000)),
				pend(3, 1, 10, shares(1000, 4000)),
				pend(4, 2, 20),
			},
			starts: map[int64][]gpu.Ref{3: n0(1)},
			wait:   map[int64]string{4: "needs 2 GPUs"},
		},
		{
			name: "takes the shared GPU it leaves fullest", policy: "fjf", nodes: shareNodes(2),
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 4000)),
				run(2, 0, n0(1), shares(2000, 9000)),
				pend(3, 1, 10, shares(1000, 3000)),
			},
			starts: map[int64][]gpu.Ref{3: n0(1)},
		},
		{
			name: "safety condition met exactly: joins", policy: "fjf", nodes: shareNodes(1),
			// 2000 + 3000 P, one lane of 11384 E: 16384.
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 11384)),
				pend(2, 1, 10, shares(3000, 11000)),
			},
			starts: map[int64][]gpu.Ref{2: n0(0)},
		},
		{
			name: "safety condition missed by 1 MiB: takes an empty GPU", policy: "fjf", nodes: shareNodes(2),
			share: ShareFullestFirst,
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 11384)),
				pend(2, 1, 10, shares(3001, 11000)),
			},
			starts: map[int64][]gpu.Ref{2: n0(1)},
		},
		{
			name: "a job started in the pass is joined by a later one", policy: "fjf", nodes: shareNodes(2),
			jobs: []Job{
				run(1, 0, n0(0), shares(2000, 14000)),
				pend(2, 1, 10, shares(1000, 5000)),
				pend(3, 1, 20, shares(1000, 4000)),
			},
			starts: map[int64][]gpu.Ref{2: n0(1), 3: n0(1)},
		},
		{
			name: "never joins a GPU a whole-GPU job holds", policy: "fjf", nodes: shareNodes(2),
			jobs: []Job{
				run(1, 0, n0(0)),
				pend(2, 1, 10, shares(1000, 1000)),
			},
			starts: map[int64][]gpu.Ref{2: n0(1)},
		},
		{
			name: "a whole-GPU job never lands on a shared GPU", policy: "fjf", nodes: shareNodes(2),
			jobs: []Job{
				run(1, 0, n0(0), shares(1000, 1000)),
				run(2, 0, n0(1), shares(1000, 1000)),
				pend(3, 1, 10),
				pend(4, 1, 20, shares(1000, 1000)),
			},
			starts: map[int64][]gpu.Ref{4: n0(0)},
			wait:   map[int64]string{3: "needs 1 GPU; 0 free"},
		},
		{
			name: "a sharing job on two GPUs is exclusive", policy: "fjf", nodes: shareNodes(4),
			jobs: []Job{
				run(1, 0, n0(0), shares(1000, 1000)),
				pend(2, 2, 10, shares(1000, 1000)),
			},
			starts: map[int64][]gpu.Ref{2: n0(1, 2)},
		},
		{
			name: "a sharing job without an estimate is exclusive", policy: "fjf", nodes: shareNodes(2),
			jobs: []Job{
				run(1, 0, n0(0), shares(1000, 1000)),
				pend(2, 1, 10, shares(0, 0)),
			},
			starts: map[int64][]gpu.Ref{2: n0(1)},
		},
		{
			name: "no room anywhere: the wait names the memory", policy: "fjf", nodes: shareNodes(2),
			jobs: []Job{
				run(1, 0, n0(0), shares(10000, 3400)),
				run(2, 0, n0(1), shares(11000, 2300)),
				pend(3, 1, 10, shares(1741, 5018)),
			},
			wait: map[int64]string{3: "needs 1.7 GiB persistent + 4.9 GiB ephemeral; the shared GPU with the most room, node-0/1, has 3.0 GiB free; no GPU is free"},
		},
		{
			name: "fifo: a blocked line blocks sharing jobs too", policy: "fifo", nodes: shareNodes(2),
			jobs: []Job{
				run(1, 0, n0(0), shares(1000, 1000)),
				run(2, 0, n0(1)),
				pend(3, 1, 10),
				pend(4, 1, 20, shares(1000, 1000)),
			},
			wait: map[int64]string{4: "waits behind job 3"},
		},
		{
			name: "a co-located job counts one GPU against its user's cap", policy: "fjf", nodes: shareNodes(1),
			teams: []Team{{Name: "", MaxGPUsPerUser: 1}},
			jobs: []Job{
				run(1, 0, n0(0), shares(1000, 1000), byUser("ann")),
				pend(2, 1, 10, shares(1000, 1000), byUser("ann")),
				pend(3, 1, 20, shares(1000, 1000), byUser("bob")),
			},
			starts: map[int64][]gpu.Ref{3: n0(0)},
			wait:   map[int64]string{2: "ann"},
		},
		{
			// Job 2 (sharing, queue 0) joins job 5's GPU; job 3 (whole)
			// must then preempt job 4, though job 5 ranks lowest (both
			// enter queue 2 now; the ID breaks the tie): job 5's GPU now
			// hosts job 2.
			name: "joining pins the running job: preemption frees another GPU", policy: "tiresias-l", nodes: shareNodes(2),
			jobs: []Job{
				run(5, 50, n0(0), shares(1000, 1000), withService(1e5)),
				run(4, 40, n0(1), withService(1e5)),
				pend(2, 1, 10, shares(1000, 1000)),
				pend(3, 1, 20),
			},
			starts:   map[int64][]gpu.Ref{2: n0(0), 3: n0(1)},
			preempts: []int64{4},
		},
		{
			name: "count mode ignores sharing", policy: "fjf", nodes: shareNodes(2),
			jobs: []Job{
				run(1, 0, n0(0), shares(1000, 1000)),
				pend(2, 1, 10, shares(1000, 1000)),
			},
			starts: map[int64][]gpu.Ref{2: nil},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Policy: c.policy, SharePlacement: c.share}
			if strings.HasPrefix(c.name, "count mode") {
				cfg.Placement = PlaceCount
			}
			sc := mustNew(t, cfg)
			s := Snapshot{Now: 100, Nodes: c.nodes, Jobs: c.jobs, Teams: c.teams}
			d := sc.Schedule(s)
			if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
				t.Fatal(joinProblems(p))
			}
			if p := shareProblems(s, d); len(p) > 0 {
				t.Fatal(joinProblems(p))
			}
			got := map[int64][]gpu.Ref{}
			for _, st := range d.Starts {
				got[st.JobID] = st.GPUs
			}
			if len(got) != len(c.starts) {
				t.Errorf("starts %v, want %v", d.Starts, c.starts)
			}
			for id, want := range c.starts {
				if g, ok := got[id]; !ok || !slices.Equal(g, want) {
					t.Errorf("job %d starts on %v (started %v), want %v", id, g, ok, want)
				}
			}
			var pre []int64
			for _, p := range d.Preempts {
				pre = append(pre, p.JobID)
			}
			if !slices.Equal(pre, c.preempts) {
				t.Errorf("preempts %v, want %v", pre, c.preempts)
			}
			for id, want := range c.wait {
				found := false
				for _, w := range d.Waits {
					if w.JobID == id {
						found = true
						if !strings.Contains(w.Reason, want) {
							t.Errorf("job %d waits for %q, want it to say %q", id, w.Reason, want)
						}
					}
				}
				if !found {
					t.Errorf("job %d has no wait; waits %+v", id, d.Waits)
				}
			}
		})
	}
}

// shareProblems checks the GPUs as d leaves them: a GPU held by several
// jobs holds sharing jobs only, and they meet the safety condition
// (persistent memory plus the largest ephemeral, one lane, fits). GPUs
// that the snapshot already over-claims (several running jobs, not all
// sharing) are only checked for starts on them.
func shareProblems(s Snapshot, d Decisions) []string {
	var out []string
	capOf := map[gpu.Ref]int64{}
	seen := map[string]bool{}
	for _, n := range s.Nodes {
		if seen[n.Name] {
			continue
		}
		seen[n.Name] = true
		for _, g := range n.GPUs {
			if _, dup := capOf[gpu.Ref{Node: n.Name, Index: g.Index}]; !dup {
				capOf[gpu.Ref{Node: n.Name, Index: g.Index}] = g.MemMiB
			}
		}
	}
	jobs := map[int64]*Job{}
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	preempted := map[int64]bool{}
	for _, p := range d.Preempts {
		preempted[p.JobID] = true
	}
	holders := map[gpu.Ref][]int64{}
	for _, j := range s.Jobs {
		if j.State == Running && !preempted[j.ID] {
			for _, g := range j.Placement {
				holders[g] = append(holders[g], j.ID)
			}
		}
	}
	startedOn := map[gpu.Ref][]int64{}
	for _, st := range d.Starts {
		for _, g := range st.GPUs {
			holders[g] = append(holders[g], st.JobID)
			startedOn[g] = append(startedOn[g], st.JobID)
		}
	}
	for g, ids := range startedOn {
		all := holders[g]
		if len(all) < 2 {
			continue
		}
		var sumP, maxE int64
		for _, id := range all {
			j := jobs[id]
			if !sharesGPU(j) {
				out = append(out, fmt.Sprintf("GPU %v: jobs %v start on it, shared with %v; job %d does not share", g, ids, all, id))
				continue
			}
			sumP += j.MemPersistentMiB
			maxE = max(maxE, j.MemEphemeralMiB)
		}
		if sumP+maxE > capOf[g] {
			out = append(out, fmt.Sprintf("GPU %v of %d MiB: jobs %v need P %d + E %d MiB", g, capOf[g], all, sumP, maxE))
		}
	}
	return out
}

// TestCoLocationOrderFree: between two shared GPUs the job would leave
// equally full, the first GPU in node order wins, whatever the order of
// the snapshot's jobs.
func TestCoLocationOrderFree(t *testing.T) {
	a := run(1, 0, on("node-1", 0), shares(1000, 2000))
	b := run(2, 0, on("node-0", 1), shares(1000, 2000))
	c := pend(3, 1, 10, shares(500, 500))
	w0, w1 := run(4, 0, on("node-0", 0)), run(5, 0, on("node-1", 1)) // no GPU is free
	sc := mustNew(t, Config{Policy: "fjf"})
	for _, jobs := range [][]Job{{a, b, c, w0, w1}, {b, a, w1, c, w0}, {c, w1, w0, b, a}} {
		d := sc.Schedule(Snapshot{Now: 100, Nodes: shareNodes(2, 2), Jobs: jobs})
		if len(d.Starts) != 1 || !slices.Equal(d.Starts[0].GPUs, on("node-0", 1)) {
			t.Errorf("jobs %d, %d, %d: starts %+v, want job 3 on node-0/1", jobs[0].ID, jobs[1].ID, jobs[2].ID, d.Starts)
		}
	}
}
