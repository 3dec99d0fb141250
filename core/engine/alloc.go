package engine

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/synergy"
)

// JobNoter is the part of Store that adds a line to a job's history; the
// engine notes there, once per run, that a job's CPU limits are not
// enforced.
type JobNoter interface {
	// AddJobNote adds note, made at at, to job id's history.
	AddJobNote(ctx context.Context, id int64, note string, at time.Time) error
}

// ProfileStore is the part of Store that keeps measured profiles by model
// and batch size across restarts (models.Store).
type ProfileStore interface {
	// SaveCPUProfile keeps p, a job's measured profile, replacing the
	// one kept for its model and batch size.
	SaveCPUProfile(ctx context.Context, p synergy.LearnedProfile) error
	// CPUProfiles returns the profiles kept, read once per engine.
	CPUProfiles(ctx context.Context) ([]synergy.LearnedProfile, error)
}

// profileKey names a model at a batch size, and holds the profile the
// user declared for the job, if any.
type profileKey struct {
	model    string
	batch    int
	declared *synergy.Profile
}

// allocState is what the engine keeps of CPU and memory allocation
// (docs/synergy.md): the allocation of each running job on each of its
// nodes, the profiles learned by profiling, and which notes it recorded.
type allocState struct {
	mu      sync.Mutex
	byJob   map[int64][]sched.Allocation
	key     map[int64]profileKey // running jobs' models and batches
	history synergy.History      // measured profiles by model and batch
	loaded  bool                 // history read from the store
	learned map[int64]bool       // jobs whose profile is recorded
	noted   map[int64]bool       // jobs whose unenforced limits are noted
}

// JobResources is a job's CPUs and memory: what it was allocated on each
// node, what it uses there, and its sensitivity profile.
type JobResources struct {
	Allocations []sched.Allocation
	Usage       []NodeUsage
	Profile     synergy.Profile
	// ProfileSource is declared, history, catalogue or none.
	ProfileSource synergy.Source
}

// NodeUsage is a job's use on one node.
type NodeUsage struct {
	Node string
	job.Usage
}

// NodeAllocation sums what the jobs on a node were allocated.
type NodeAllocation struct {
	CPUMilli int64
	MemMiB   int64
	Jobs     int
}

// loadProfiles reads the measured profiles the store keeps, once.
func (e *Engine) loadProfiles(ctx context.Context) {
	e.alloc.mu.Lock()
	done := e.alloc.loaded
	e.alloc.loaded = true
	e.alloc.mu.Unlock()
	if done {
		return
	}
	lps, err := e.cfg.Store.CPUProfiles(ctx)
	if err != nil {
		e.cfg.Logger.Warn("measured CPU profiles unavailable; jobs will be profiled again", "err", err)
		return
	}
	e.alloc.mu.Lock()
	defer e.alloc.mu.Unlock()
	for _, lp := range lps {
		e.alloc.history.Record(lp.Model, lp.Batch, lp.Profile)
	}
}

// cpuProfile gives the scheduler the job's profile, most trusted first
// (docs/synergy.md): the one its user declared, else the learned profile
// of its model at its batch size (or the nearest batch); the scheduler
// falls back to the catalogue by model otherwise.
func (e *Engine) cpuProfile(sj *sched.Job, j *Job) {
	if j.CPUProfile != nil {
		p := *j.CPUProfile
		sj.CPUProfile, sj.CPUProfileSource = &p, synergy.SourceDeclared
		return
	}
	if sj.Model == "" {
		return
	}
	e.alloc.mu.Lock()
	defer e.alloc.mu.Unlock()
	if p, ok := e.alloc.history.Lookup(sj.Model, j.BatchSize); ok {
		sj.CPUProfile, sj.CPUProfileSource = &p, synergy.SourceHistory
	}
}

// recordAllocations keeps the pass's allocations, forgets those of jobs
// no longer running and allocates anew the nodes they left (so that their
// CPUs and memory go to the neighbours), and resizes running jobs whose
// allocation changed (before the pass's jobs start beside them).
func (e *Engine) recordAllocations(ctx context.Context, snap sched.Snapshot, d sched.Decisions, byID *passJobs) {
	starting := make(map[int64]bool, len(d.Starts))
	for _, st := range d.Starts {
		starting[st.JobID] = true
	}
	e.alloc.mu.Lock()
	if e.alloc.byJob == nil {
		e.alloc.byJob, e.alloc.key = map[int64][]sched.Allocation{}, map[int64]profileKey{}
		e.alloc.learned, e.alloc.noted = map[int64]bool{}, map[int64]bool{}
	}
	left := map[string]bool{} // nodes that jobs left
	for id, as := range e.alloc.byJob {
		if _, running := e.runs[id]; !running && !starting[id] {
			for _, a := range as {
				left[a.Node] = true
			}
			delete(e.alloc.byJob, id)
			delete(e.alloc.key, id)
			delete(e.alloc.learned, id)
			delete(e.alloc.noted, id)
		}
	}
	e.alloc.mu.Unlock()
	allocs := append(slices.Clone(d.Allocations), e.reallocateLeft(snap, d, left)...)
	e.alloc.mu.Lock()
	var resize []sched.Allocation
	for id, as := range groupByJob(allocs) {
		old := e.alloc.byJob[id]
		j := byID.job(id)
		e.alloc.key[id] = profileKey{j.Model, j.BatchSize, j.CPUProfile}
		if starting[id] {
			e.alloc.byJob[id] = as
			continue
		}
		// A job on several nodes keeps its allocation on the others.
		merged := slices.DeleteFunc(slices.Clone(old), func(o sched.Allocation) bool {
			return slices.ContainsFunc(as, func(a sched.Allocation) bool { return a.Node == o.Node })
		})
		merged = append(merged, as...)
		slices.SortFunc(merged, func(a, b sched.Allocation) int { return strings.Compare(a.Node, b.Node) })
		e.alloc.byJob[id] = merged
		for _, a := range as {
			if i := slices.IndexFunc(old, func(o sched.Allocation) bool { return o.Node == a.Node }); i < 0 ||
				old[i].CPUMilli != a.CPUMilli || old[i].MemMiB != a.MemMiB {
				resize = append(resize, a)
			}
		}
	}
	e.alloc.mu.Unlock()
	for _, a := range resize {
		if _, running := e.runs[a.JobID]; !running {
			continue
		}
		if rz, ok := e.node(a.Node).(Resizer); ok {
			if err := rz.Resize(ctx, a.JobID, job.Resources{CPUMilli: a.CPUMilli, MemMiB: a.MemMiB}); err != nil {
				e.cfg.Logger.Warn("resize job", "job", a.JobID, "node", a.Node, "err", err)
			}
		}
	}
}

// reallocateLeft allocates anew the nodes that jobs left since the last
// pass and on which no job started in this one (the pass allocated
// those), among the jobs still running there.
func (e *Engine) reallocateLeft(snap sched.Snapshot, d sched.Decisions, left map[string]bool) []sched.Allocation {
	for _, a := range d.Allocations {
		delete(left, a.Node)
	}
	if len(left) == 0 {
		return nil
	}
	var nodes []sched.Node
	for _, n := range snap.Nodes {
		if left[n.Name] {
			nodes = append(nodes, n)
		}
	}
	preempted := make(map[int64]bool, len(d.Preempts))
	for _, p := range d.Preempts {
		preempted[p.JobID] = true
	}
	var jobs []sched.Job
	for _, j := range snap.Jobs {
		if j.State == sched.Running && !preempted[j.ID] {
			jobs = append(jobs, j)
		}
	}
	return sched.AllocateNodes(e.cfg.Scheduler.Config().CPUAlloc, nodes, jobs)
}

func groupByJob(as []sched.Allocation) map[int64][]sched.Allocation {
	out := map[int64][]sched.Allocation{}
	for _, a := range as {
		out[a.JobID] = append(out[a.JobID], a)
	}
	return out
}

// toldCPUs are the whole CPUs job id is told on its machines
// (job.Resources.Env), summed over them; 0 without an allocation.
func (e *Engine) toldCPUs(id int64) int64 {
	e.alloc.mu.Lock()
	defer e.alloc.mu.Unlock()
	var n int64
	for _, a := range e.alloc.byJob[id] {
		n += job.WholeCPUs(a.CPUMilli)
	}
	return n
}

// resourcesFor is what the agent of node gets for job id: its allocation
// there, and a request to profile it when its user declared no profile,
// nothing measured is known of its model and the node has idle cores to
// lend.
func (e *Engine) resourcesFor(id int64, node string) *job.Resources {
	e.alloc.mu.Lock()
	defer e.alloc.mu.Unlock()
	i := slices.IndexFunc(e.alloc.byJob[id], func(a sched.Allocation) bool { return a.Node == node })
	if i < 0 {
		return nil
	}
	a := e.alloc.byJob[id][i]
	r := &job.Resources{CPUMilli: a.CPUMilli, MemMiB: a.MemMiB, PropCPUMilli: a.PropCPUMilli}
	measured := strings.HasPrefix(a.Profile, string(synergy.SourceHistory)) || strings.HasPrefix(a.Profile, string(synergy.SourceDeclared))
	if key := e.alloc.key[id]; !measured && key.declared == nil && key.model != "" {
		if n := e.node(node); n != nil {
			cpus, _ := n.Resources()
			var used int64
			for _, as := range e.alloc.byJob {
				for _, o := range as {
					if o.Node == node && o.JobID != id {
						used += o.CPUMilli
					}
				}
			}
			if lend := int64(cpus)*1000 - used; lend > max(a.CPUMilli, a.PropCPUMilli) {
				r.ProfileMaxMilli = lend
			}
		}
	}
	return r
}

// learnProfiles records the curves agents measured, by model and batch
// (in the store too, when it keeps them), so that the next job of the
// same model is not profiled again, and notes in a job's history once
// that its limits are not enforced.
func (e *Engine) learnProfiles(ctx context.Context, now time.Time) {
	e.loadProfiles(ctx)
	type note struct {
		id   int64
		text string
	}
	var notes []note
	var learned []synergy.LearnedProfile
	for _, n := range e.Nodes() {
		ur, ok := n.(UsageReporter)
		if !ok {
			continue
		}
		for _, u := range ur.JobUsage(now) {
			e.alloc.mu.Lock()
			as, running := e.alloc.byJob[u.JobID]
			key := e.alloc.key[u.JobID]
			if running && len(u.Profile) > 0 && !e.alloc.learned[u.JobID] && key.model != "" && key.declared == nil {
				gpus := 0
				for _, a := range as {
					if a.Node == n.Name() {
						gpus = a.GPUs
					}
				}
				// Only CPU is profiled: memory keeps the catalogue's curve.
				p, _ := synergy.Resolve(nil, nil, key.model, key.batch)
				p.Family, p.CPU = "measured", synergy.MeasuredCurve(u.Profile, gpus)
				if p.Validate() == nil && len(p.CPU) > 0 {
					e.alloc.history.Record(key.model, key.batch, p)
					e.alloc.learned[u.JobID] = true
					learned = append(learned, synergy.LearnedProfile{Model: key.model, Batch: key.batch, Profile: p, JobID: u.JobID, At: now})
					e.cfg.Logger.Info("CPU profile learned", "job", u.JobID, "model", key.model, "batch", key.batch, "points", len(u.Profile))
				}
			}
			if running && strings.HasPrefix(u.Note, job.NotEnforcedPrefix) && !e.alloc.noted[u.JobID] {
				e.alloc.noted[u.JobID] = true
				notes = append(notes, note{u.JobID, u.Note + " (on " + n.Name() + ")"})
			}
			e.alloc.mu.Unlock()
		}
	}
	for _, lp := range learned {
		if err := e.cfg.Store.SaveCPUProfile(ctx, lp); err != nil {
			e.cfg.Logger.Warn("keep measured CPU profile", "job", lp.JobID, "err", err)
		}
	}
	for _, nt := range notes {
		e.cfg.Logger.Warn("job's CPU limits not enforced", "job", nt.id, "why", nt.text)
		if err := e.cfg.Store.AddJobNote(ctx, nt.id, nt.text, now); err != nil {
			e.cfg.Logger.Warn("note job history", "job", nt.id, "err", err)
		}
	}
}

// JobResources returns a running job's allocations, use and profile;
// false when it has no allocation (not running, or CPUs not known).
func (e *Engine) JobResources(id int64) (JobResources, bool) {
	e.alloc.mu.Lock()
	as := slices.Clone(e.alloc.byJob[id])
	key := e.alloc.key[id]
	e.alloc.mu.Unlock()
	if len(as) == 0 {
		return JobResources{}, false
	}
	out := JobResources{Allocations: as}
	sj := sched.Job{ID: id, Model: key.model}
	e.cpuProfile(&sj, &Job{BatchSize: key.batch, CPUProfile: key.declared})
	out.Profile, out.ProfileSource = sched.JobProfile(&sj)
	now := e.cfg.Now()
	for _, a := range as {
		if ur, ok := e.node(a.Node).(UsageReporter); ok {
			for _, u := range ur.JobUsage(now) {
				if u.JobID == id {
					out.Usage = append(out.Usage, NodeUsage{Node: a.Node, Usage: u})
				}
			}
		}
	}
	return out, true
}

// NodeAllocations sums, per node, the CPUs and memory allocated to the
// jobs running there.
func (e *Engine) NodeAllocations() map[string]NodeAllocation {
	e.alloc.mu.Lock()
	defer e.alloc.mu.Unlock()
	out := map[string]NodeAllocation{}
	for _, id := range slices.Sorted(maps.Keys(e.alloc.byJob)) {
		for _, a := range e.alloc.byJob[id] {
			n := out[a.Node]
			n.CPUMilli += a.CPUMilli
			n.MemMiB += a.MemMiB
			n.Jobs++
			out[a.Node] = n
		}
	}
	return out
}
