package sched

import (
	"fmt"
	"strings"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// after is the cluster as the decisions leave it.
type after struct {
	jobs     map[int64]*Job
	started  map[int64]Start
	preempt  map[int64]Preempt
	held     map[gpu.Ref]int64 // GPU -> job holding it after the pass
	capacity int               // GPUs on schedulable nodes
	free     map[string]int    // free GPUs per schedulable node (nodes mode)
	freeAll  int
}

// gpuIndex tells which GPUs exist: the first node of each name.
func gpuIndex(s Snapshot) (exists map[gpu.Ref]bool, sched map[string]bool) {
	exists, sched = map[gpu.Ref]bool{}, map[string]bool{}
	seen := map[string]bool{}
	for _, n := range s.Nodes {
		if seen[n.Name] {
			continue
		}
		seen[n.Name] = true
		sched[n.Name] = !n.Unschedulable
		for _, g := range n.GPUs {
			exists[gpu.Ref{Node: n.Name, Index: g.Index}] = true
		}
	}
	return exists, sched
}

// checkDecisions returns what is wrong with d as the outcome of one pass
// over s under cfg. It holds for any snapshot with unique job IDs.
func checkDecisions(s Snapshot, cfg Config, d Decisions) (problems []string, a after) {
	bad := func(f string, args ...any) { problems = append(problems, fmt.Sprintf(f, args...)) }
	a = after{jobs: map[int64]*Job{}, started: map[int64]Start{}, preempt: map[int64]Preempt{}, held: map[gpu.Ref]int64{}}
	for i := range s.Jobs {
		a.jobs[s.Jobs[i].ID] = &s.Jobs[i]
	}
	count := cfg.Placement == PlaceCount
	exists, sched := gpuIndex(s)

	for _, p := range d.Preempts {
		j := a.jobs[p.JobID]
		switch {
		case j == nil || j.State != Running:
			bad("preempts job %d, which is not running", p.JobID)
		case a.preempt[p.JobID].JobID != 0:
			bad("preempts job %d twice", p.JobID)
		case p.Reason == "":
			bad("preempts job %d without a reason", p.JobID)
		}
		a.preempt[p.JobID] = p
	}
	// GPUs running jobs keep, and leaving ones (never preempted).
	for _, j := range s.Jobs {
		if !j.holds() || a.preempt[j.ID].JobID != 0 || count {
			continue
		}
		for _, g := range j.Placement {
			if exists[g] {
				a.held[g] = j.ID
			}
		}
	}
	for _, st := range d.Starts {
		j := a.jobs[st.JobID]
		switch {
		case j == nil || j.State != Pending:
			bad("starts job %d, which is not pending", st.JobID)
			continue
		case a.started[st.JobID].JobID != 0:
			bad("starts job %d twice", st.JobID)
		}
		a.started[st.JobID] = st
		if count {
			if len(st.GPUs) != 0 {
				bad("count mode names GPUs for job %d", st.JobID)
			}
			continue
		}
		if len(st.GPUs) != j.GPUs {
			bad("job %d needs %d GPUs, gets %d (gang)", st.JobID, j.GPUs, len(st.GPUs))
		}
		for _, g := range st.GPUs {
			switch {
			case !exists[g]:
				bad("job %d starts on %v, which does not exist", st.JobID, g)
			case !sched[g.Node]:
				bad("job %d starts on unschedulable node %s", st.JobID, g.Node)
			case a.held[g] != 0 && !(sharesGPU(j) && sharesGPU(a.jobs[a.held[g]])):
				bad("GPU %v given to job %d is held by job %d", g, st.JobID, a.held[g])
			}
			a.held[g] = st.JobID
		}
	}
	for _, p := range d.Preempts {
		if _, ok := a.started[p.For]; !ok {
			bad("job %d is preempted for job %d, which does not start", p.JobID, p.For)
		}
	}

	// Capacity.
	a.free = map[string]int{}
	seen := map[string]bool{}
	for _, n := range s.Nodes {
		if seen[n.Name] || n.Unschedulable {
			seen[n.Name] = true
			continue
		}
		seen[n.Name] = true
		a.capacity += len(n.GPUs)
		f := 0
		for _, g := range n.GPUs {
			if _, busy := a.held[gpu.Ref{Node: n.Name, Index: g.Index}]; !busy {
				f++
			}
		}
		a.free[n.Name] = f
		a.freeAll += f
	}
	if count {
		// Count mode counts every schedulable node's GPUs, names aside.
		a.capacity = 0
		for _, n := range s.Nodes {
			if !n.Unschedulable {
				a.capacity += len(n.GPUs)
			}
		}
		a.freeAll = a.capacity
		for _, j := range s.Jobs {
			if (j.holds() && a.preempt[j.ID].JobID == 0) || a.started[j.ID].JobID != 0 {
				a.freeAll -= max(j.GPUs, 0)
			}
		}
		if len(d.Starts) > 0 && a.freeAll < 0 {
			bad("count mode: %d GPUs more in use than the cluster has", -a.freeAll)
		}
	}

	// Waits: every pending job not started, every preempted job, once.
	if !cfg.OmitWaits {
		waits := map[int64]Wait{}
		next := map[int]int{}
		for _, w := range d.Waits {
			if _, dup := waits[w.JobID]; dup {
				bad("job %d waits twice", w.JobID)
			}
			waits[w.JobID] = w
			next[w.Queue]++
			if w.Position != next[w.Queue] {
				bad("job %d has position %d in queue %d, want %d", w.JobID, w.Position, w.Queue, next[w.Queue])
			}
			if w.Reason == "" || w.Cause == "" {
				bad("job %d waits without a reason", w.JobID)
			}
		}
		for _, j := range s.Jobs {
			_, waits := waits[j.ID]
			want := (j.State == Pending && a.started[j.ID].JobID == 0) || a.preempt[j.ID].JobID != 0
			if waits != want {
				bad("job %d (%v): has a wait %v, want %v", j.ID, j.State, waits, want)
			}
		}
	}

	changed := map[int64]bool{}
	for _, c := range d.QueueChanges {
		j := a.jobs[c.JobID]
		switch {
		case j == nil:
			bad("queue change for unknown job %d", c.JobID)
		case changed[c.JobID]:
			bad("two queue changes for job %d", c.JobID)
		case c.From != j.Queue.Index || c.To != c.State.Index ||
			(c.From == c.To && c.State.Promotions == j.Queue.Promotions && a.preempt[c.JobID].JobID == 0):
			// Within one queue: a promotion, or a preempted job put back
			// at the head of its line (preempted-first).
			bad("queue change %+v for a job in queue %d", c, j.Queue.Index)
		}
		changed[c.JobID] = true
	}
	if d.Recheck != 0 && !(d.Recheck > s.Now) {
		bad("recheck %v is not after now %v", d.Recheck, s.Now)
	}
	return problems, a
}

// unconserved lists waiting jobs that would fit the GPUs left free: a
// non-blocking policy must leave none. It assumes LocalityWaitS < 0, so
// that a consolidated job needs exactly its fewest nodes.
func unconserved(s Snapshot, cfg Config, d Decisions, a after) []string {
	var out []string
	caps := []int{}
	seen := map[string]bool{}
	for _, n := range s.Nodes {
		if !seen[n.Name] && !n.Unschedulable {
			caps = append(caps, len(n.GPUs))
		}
		seen[n.Name] = true
	}
	free := []int{}
	for _, f := range a.free {
		free = append(free, f)
	}
	sortDesc(caps)
	sortDesc(free)
	thr := cfg.SkewThreshold
	if thr == 0 {
		thr = DefaultSkewThreshold
	}
	for _, j := range s.Jobs {
		waiting := (j.State == Pending && a.started[j.ID].JobID == 0) || a.preempt[j.ID].JobID != 0
		if !waiting || j.GPUs <= 0 {
			continue
		}
		fits := j.GPUs <= a.freeAll
		if cfg.Placement != PlaceCount && fits {
			skew, known := j.Skew, j.Skew > 0
			if !known {
				if m, ok := LookupModel(j.Model); ok {
					skew, known = m.Skew(), true
				}
			}
			if !known || skew >= thr {
				k, sum := 0, 0
				for sum < j.GPUs && k < len(caps) {
					sum += caps[k]
					k++
				}
				sum = 0
				for i := 0; i < k && i < len(free); i++ {
					sum += free[i]
				}
				fits = sum >= j.GPUs
			}
		}
		if fits {
			out = append(out, fmt.Sprintf("job %d (%d GPUs, %s) waits though it fits", j.ID, j.GPUs, j.Model))
		}
	}
	return out
}

func sortDesc(v []int) {
	for i := 1; i < len(v); i++ {
		for k := i; k > 0 && v[k] > v[k-1]; k-- {
			v[k], v[k-1] = v[k-1], v[k]
		}
	}
}

func joinProblems(p []string) string {
	if len(p) > 8 {
		p = append(p[:8], fmt.Sprintf("... and %d more", len(p)-8))
	}
	return strings.Join(p, "\n")
}
