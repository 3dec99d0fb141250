package sim

import (
	"math"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
)

// The handover (Config.HandoverS), as the live engine applies it
// (core/engine/runs.go): a preempted job runs on for HandoverS seconds
// after the preemption (it saves a checkpoint and exits), holding its
// GPUs; its run, its executed time and attained service end only then,
// as the engine counts a run until its processes exit. Meanwhile the
// scheduler sees it leaving (sched.Leaving), as the engine shows it:
// holding its GPUs, neither to start nor to preempt. A job the scheduler
// places on its GPUs starts once they are
// released, through the same sched.HandOver; the GPUs are promised to
// that job (sched.Promises): no other job takes them meanwhile, and it
// starts on them, as decided, in the pass after the last of them is
// released. In count mode (the scheduler names no GPUs) a start waits
// while fewer GPUs are free than it needs.

// release is a preempted job's hold on its GPUs.
type release struct {
	gpus  []gpu.Ref // nil in count mode
	n     int
	job   int64
	at    float64 // when the GPUs are free again
	since float64 // when the job was preempted
	// asked is the job's service when it was preempted: what it attains
	// in the handover counts for no rank, as the engine counts it
	// (core/engine/runs.go, run.handover): the pass sees it leave with
	// this service, and its queue state leaves the rest out once it has.
	asked usage.Service
}

// beginHandover asks preempted job j to stop: it runs on, holding its
// GPUs, until s.now + HandoverS. Without a handover it reports false, and
// the job leaves at once.
func (s *simulator) beginHandover(j *job) bool {
	if s.cfg.HandoverS <= 0 {
		return false
	}
	j.stopping = true
	if s.cfg.Sched.Placement != sched.PlaceCount {
		// Count mode names no GPUs to promise (handOver keeps a start
		// back while too few are free): the job is seen running, and a
		// preemption of it again changes nothing.
		s.snap[j.pos].State = sched.Leaving
	}
	asked := usage.Service{ExecutedS: j.executed, GPUSeconds: j.service}.Ran(s.now-j.runStart, j.acc)
	s.releases = append(s.releases, release{gpus: j.gpus, n: j.tj.GPUs, job: j.tj.ID, at: s.now + s.cfg.HandoverS, since: s.now, asked: asked})
	return true
}

// releaseDue ends the runs whose handover has ended by s.now, freeing
// their GPUs, and reports whether any did.
func (s *simulator) releaseDue() bool {
	kept, freed := s.releases[:0], false
	for _, r := range s.releases {
		if r.at <= s.now {
			if j := s.byID.get(r.job); j != nil && j.stopping {
				j.stopping = false
				s.leave(j)
				qs := &s.snap[j.pos].Queue
				qs.CycleService += max(j.service-r.asked.GPUSeconds, 0)
				qs.CycleExecuted += max(j.executed-r.asked.ExecutedS, 0)
			}
			freed = true
			continue
		}
		kept = append(kept, r)
	}
	s.releases = kept
	return freed
}

// askedService is the service of job id when it was asked to stop, and
// whether it was.
func (s *simulator) askedService(id int64) (usage.Service, bool) {
	for i := range s.releases {
		if s.releases[i].job == id {
			return s.releases[i].asked, true
		}
	}
	return usage.Service{}, false
}

// nextRelease is when the next hold ends; +Inf with none.
func (s *simulator) nextRelease() float64 {
	t := math.Inf(1)
	for _, r := range s.releases {
		t = min(t, r.at)
	}
	return t
}

// handOver keeps back the starts that need held GPUs, and records when
// each kept-back job first waited, for the handover time.
func (s *simulator) handOver(starts []sched.Start) []sched.Start {
	if len(s.releases) == 0 {
		return starts
	}
	held := make(map[gpu.Ref]int64)
	heldN := 0
	first := math.Inf(1)
	for _, r := range s.releases {
		for _, g := range r.gpus {
			held[g] = r.job
		}
		heldN += r.n
		first = min(first, r.since)
	}
	starts, _ = s.promised.Hold(starts, s.waiting, s.stopping)
	now, waits := sched.HandOver(starts, held)
	s.promised.Keep(starts, waits, held)
	for _, w := range waits {
		if _, ok := s.waitingSince[w.JobID]; !ok {
			s.waitingSince[w.JobID] = first
		}
	}
	// Count mode: what is free must cover each start.
	out := now[:0]
	free := s.gpus.free
	for _, st := range now {
		j := s.byID.get(st.JobID)
		if len(st.GPUs) == 0 && j != nil && j.tj.GPUs > free {
			if _, ok := s.waitingSince[st.JobID]; !ok {
				s.waitingSince[st.JobID] = first
			}
			continue
		}
		if len(st.GPUs) == 0 && j != nil {
			free -= j.tj.GPUs
		}
		out = append(out, st)
	}
	return out
}

// startedAfterHandover records the handover time of a job that waited
// for held GPUs.
func (s *simulator) startedAfterHandover(id int64) {
	if since, ok := s.waitingSince[id]; ok {
		delete(s.waitingSince, id)
		s.handovers++
		s.handoverS += s.now - since
	}
}

// waiting tells whether job id is active and not running.
func (s *simulator) waiting(id int64) bool {
	j := s.byID.get(id)
	return j != nil && j.pos >= 0 && !j.done && !j.running
}

// stopping tells whether job id, preempted, still holds its GPUs.
func (s *simulator) stopping(id int64) bool {
	for _, r := range s.releases {
		if r.job == id {
			return true
		}
	}
	return false
}

// startPromised makes the starts kept back by a handover whose GPUs have
// all been released, before the pass decides anything, as the live
// engine does (core/engine: startPromised). A promise whose job no longer
// waits or whose GPUs are taken is forgotten: the pass decides afresh.
func (s *simulator) startPromised() error {
	for _, st := range s.promised.Due(s.stopping) {
		if !s.waiting(st.JobID) {
			continue
		}
		j := s.byID.get(st.JobID)
		if err := s.gpus.take(j.tj.GPUs, st.GPUs, s.snap[j.pos].Sharing); err != nil {
			continue
		}
		if err := s.started(j, st.GPUs); err != nil {
			return err
		}
	}
	return nil
}
