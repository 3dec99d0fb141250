package salussim

import (
	"fmt"
	"slices"

	"github.com/gpuportal/gpuportal/core/lanes"
)

// loop handles every instant with events: completions first, then
// arrivals, then (if anything changed) a pass over the waiting jobs,
// then iteration grants.
func (s *simulator) loop() error {
	for {
		t, ok := s.ev.next()
		if s.next < len(s.jobs) && (!ok || s.jobs[s.next].t.Submit <= t) {
			t, ok = s.jobs[s.next].t.Submit, true
		}
		if !ok {
			break
		}
		s.advance(t)
		changed, err := s.completions()
		if err != nil {
			return err
		}
		for s.next < len(s.jobs) && s.jobs[s.next].t.Submit <= s.now {
			j := s.jobs[s.next]
			s.next++
			if j.shared {
				if err := s.pool.Submit(s.lanesJob(j), s.now); err != nil {
					return err
				}
			}
			s.waiting = append(s.waiting, j)
			changed = true
		}
		if changed {
			if err := s.pass(); err != nil {
				return err
			}
		}
		if err := s.grant(); err != nil {
			return err
		}
		s.retime()
	}
	if len(s.waiting) > 0 {
		return fmt.Errorf("%d jobs still wait with no event left", len(s.waiting))
	}
	return nil
}

func (s *simulator) lanesJob(j *simJob) lanes.Job {
	return lanes.Job{ID: j.t.ID, Memory: j.mem, DurationS: j.t.Duration}
}

// advance moves the clock to t, integrating the busy GPUs.
func (s *simulator) advance(t float64) {
	if s.started {
		dt := t - s.lastT
		s.busyS += float64(s.busy) * dt
		for i := range s.gpus {
			s.hostedS += float64(s.gpus[i].hosted) * dt
		}
	}
	s.started, s.lastT, s.now = true, t, t
}

// completions ends every run and iteration due now.
func (s *simulator) completions() (changed bool, err error) {
	for {
		t, ok := s.ev.next()
		if !ok || t > s.now {
			return changed, nil
		}
		e := s.ev.pop()
		j := e.job
		if !j.shared {
			if err := s.finishWhole(j); err != nil {
				return changed, err
			}
			changed = true
			continue
		}
		done, freed, err := s.endIteration(j)
		if err != nil {
			return changed, err
		}
		changed = changed || done || freed
	}
}

// finishWhole ends a job that held whole GPUs.
func (s *simulator) finishWhole(j *simJob) error {
	for _, g := range j.gpus {
		s.host(g, -1)
		if err := s.pool.Unhold(g); err != nil {
			return fmt.Errorf("job %d: %w", j.t.ID, err)
		}
	}
	s.finishJob(j)
	return nil
}

func (s *simulator) finishJob(j *simJob) {
	j.done, j.finish, j.work = true, s.now, 0
	s.res.add(j, s.cfg)
}

// endIteration ends shared job j's iteration now. It reports whether the
// job finished, and whether room may have appeared for a waiting job: its
// lane's memory changed, or drained lanes may be merged.
func (s *simulator) endIteration(j *simJob) (done, freed bool, err error) {
	g := &s.gpus[j.gpu]
	s.touch(j.gpu)
	g.running = slices.DeleteFunc(g.running, func(x *simJob) bool { return x == j })
	j.work = max(0, j.work-j.iterLen)
	j.ver++
	before, _ := s.pool.Held(j.t.ID)
	f, err := s.pool.Finish(j.t.ID, s.now, j.mem.EphemeralMiB)
	if err != nil {
		return false, false, err
	}
	if f.Exceeded {
		return false, false, fmt.Errorf("job %d exceeded its lane with its own declared E", j.t.ID)
	}
	if j.work <= 1e-9 {
		return true, true, s.releaseShared(j)
	}
	freed = f.Retry || f.EphemeralMiB != before.EphemeralMiB
	return false, freed, s.pool.Request(j.t.ID, 0)
}

func (s *simulator) releaseShared(j *simJob) error {
	if err := s.pool.Release(j.t.ID); err != nil {
		return err
	}
	s.host(j.gpu, -1)
	s.finishJob(j)
	return nil
}

// host changes GPU g's job count, keeping the busy count.
func (s *simulator) host(g, delta int) {
	s.touch(g)
	st := &s.gpus[g]
	was := st.hosted > 0
	st.hosted += delta
	if now := st.hosted > 0; now != was {
		if now {
			s.busy++
		} else {
			s.busy--
		}
	}
	st.dirty = true
}
