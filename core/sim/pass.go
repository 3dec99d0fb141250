package sim

import (
	"fmt"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
)

// pass runs one scheduling pass at s.now and applies its decisions.
func (s *simulator) pass() error {
	s.compact()
	if err := s.startPromised(); err != nil {
		return err
	}
	for _, j := range s.running {
		ran := s.now - j.runStart
		sj := &s.snap[j.pos]
		sv := usage.Service{ExecutedS: j.executed, GPUSeconds: j.service}.Ran(ran, j.acc)
		if j.stopping {
			sv, _ = s.askedService(j.tj.ID) // its handover counts for no rank
		}
		sj.ExecutedS, sj.AttainedService, sj.HeldGPUs = sv.ExecutedS, sv.GPUSeconds, j.acc.Held
	}
	s.passes++
	s.lastPass = s.now
	snap := sched.Snapshot{Now: s.now, Nodes: s.nodes, Jobs: s.snap, Teams: s.teams.snapshot(), Reservations: s.reservations}
	if s.learner != nil {
		snap.GPUTimeDist = s.learner.Dist(s.snap)
	}
	// Jobs promised GPUs that victims still hold are seen running there
	// (sched.Promises.Present), then restored: they have not started.
	restore := s.promised.Present(s.snap, s.now)
	d := s.sc.Schedule(snap)
	if s.cfg.Observer != nil {
		s.cfg.Observer.Pass(snap, d)
	}
	restore()
	s.reservations = d.Reservations
	for _, r := range d.Reservations {
		if j := s.byID.get(r.JobID); j != nil {
			j.reserved = true
		}
	}
	for _, qc := range d.QueueChanges {
		j, err := s.lookup(qc.JobID, "queue change")
		if err != nil {
			return err
		}
		s.snap[j.pos].Queue = qc.State
	}
	for _, p := range d.Preempts {
		j, err := s.lookup(p.JobID, "preempt")
		if err != nil {
			return err
		}
		if !j.running {
			if _, ok := s.promised[p.JobID]; ok {
				delete(s.promised, p.JobID) // shown running on GPUs promised to it: it waits on
				continue
			}
			return fmt.Errorf("t=%v: scheduler preempts job %d, which is not running", s.now, p.JobID)
		}
		if j.stopping {
			if s.snap[j.pos].State == sched.Leaving {
				return fmt.Errorf("t=%v: scheduler preempts job %d, which is leaving", s.now, p.JobID)
			}
			continue // count mode: asked to stop already, it leaves when its handover ends
		}
		s.preemptions++
		j.preempts++
		if s.now-j.runStart < BriefRunS {
			s.briefRuns++
		}
		if j.class == sched.ClassSession {
			s.sessionPreempts++
			if p.Reclaim {
				s.sessionReclaims++
			}
		}
		if p.Reclaim && s.teams != nil {
			s.teams.t[j.team].reclaimed++
			if by := s.byID.get(p.For); by != nil {
				s.teams.t[by.team].reclaims++
			}
		}
		if !s.beginHandover(j) {
			s.leave(j)
		}
	}
	for _, st := range s.handOver(d.Starts) {
		j, err := s.lookup(st.JobID, "start")
		if err != nil {
			return err
		}
		if j.running {
			return fmt.Errorf("t=%v: scheduler starts job %d, which is already running", s.now, st.JobID)
		}
		if err := s.gpus.take(j.tj.GPUs, st.GPUs, s.snap[j.pos].Sharing); err != nil {
			return fmt.Errorf("t=%v: scheduler starts job %d: %w", s.now, st.JobID, err)
		}
		if err := s.started(j, st.GPUs); err != nil {
			return err
		}
	}
	switch {
	case d.Recheck > s.now:
		s.recheck = d.Recheck
	case d.Recheck == 0 || d.Recheck == s.now:
		// Nothing to recheck, or nothing later than this very pass.
		s.recheck = 0
	default:
		return fmt.Errorf("t=%v: scheduler asks for a recheck in the past, at %v", s.now, d.Recheck)
	}
	return nil
}

// BriefRunS is how long a run lasts, at most, to count among
// Result.BriefRuns when it is preempted.
const BriefRunS = 60

// leave ends the run of a preempted job: it waits again, owing the
// preemption's restore cost (Config.PreemptCostS).
func (s *simulator) leave(j *job) {
	s.stopRun(j)
	if s.teams != nil {
		s.teams.t[j.team].pending += j.tj.GPUs
	}
	if c := s.cfg.PreemptCostS; c > 0 {
		j.owed += c
		if s.cfg.LimitFactor > 0 {
			// The restore runs within the limit too.
			s.snap[j.pos].TimeLimitS += c
		} else {
			s.snap[j.pos].DurationS += c
		}
	}
}

// started starts j on gpus, which it has taken.
func (s *simulator) started(j *job, gpus []gpu.Ref) error {
	s.startRun(j, gpus)
	if s.cfg.Observer != nil {
		s.cfg.Observer.Started(j.tj.ID, s.now)
	}
	s.startedAfterHandover(j.tj.ID)
	if err := s.shareStart(j); err != nil {
		return fmt.Errorf("t=%v: scheduler starts job %d: %w", s.now, j.tj.ID, err)
	}
	return nil
}

// lookup finds an active job the scheduler named.
func (s *simulator) lookup(id int64, what string) (*job, error) {
	j := s.byID.get(id)
	if j == nil || j.pos < 0 || j.done {
		return nil, fmt.Errorf("t=%v: scheduler's %s names job %d, which is not in the snapshot", s.now, what, id)
	}
	return j, nil
}
