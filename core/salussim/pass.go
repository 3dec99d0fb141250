package salussim

import (
	"errors"
	"slices"

	"github.com/gpuportal/gpuportal/core/lanes"
)

// pass starts waiting jobs in arrival order, any that fits.
func (s *simulator) pass() error {
	var idle []int
	fresh := false
	kept := s.waiting[:0]
	for _, j := range s.waiting {
		if j.shared {
			pl, err := s.pool.Admit(j.t.ID, s.now)
			if errors.Is(err, lanes.ErrNoRoom) {
				if _, g, ok := s.pool.Drain(); ok && errors.Is(err, lanes.ErrDraining) {
					s.cutLong(g) // the drained lanes end their turns on time
				}
				kept = append(kept, j)
				continue
			}
			if err != nil {
				return err
			}
			fresh = false
			if len(pl.Merged) > 0 {
				s.res.Merges++
			}
			if err := s.startShared(j, pl); err != nil {
				return err
			}
			continue
		}
		if !fresh {
			idle, fresh = s.pool.Idle(), true
		}
		if len(idle) < j.t.GPUs {
			kept = append(kept, j)
			continue
		}
		j.gpus = slices.Clone(idle[:j.t.GPUs])
		idle = idle[j.t.GPUs:]
		for _, g := range j.gpus {
			if err := s.pool.Hold(g); err != nil {
				return err
			}
			s.host(g, 1)
		}
		j.admitted = s.now
		s.ev.push(s.now+j.work, j)
	}
	clear(s.waiting[len(kept):])
	s.waiting = kept
	s.res.Spreads += len(s.pool.Defragment())
	return nil
}

func (s *simulator) startShared(j *simJob, pl lanes.Placement) error {
	g := pl.GPU
	j.gpu, j.admitted = g, s.now
	s.host(g, 1)
	if !pl.NewLane || len(pl.Merged) > 0 {
		s.cutLong(g)
	}
	if j.work <= 0 {
		return s.releaseShared(j)
	}
	return s.pool.Request(j.t.ID, 0)
}
