package salussim

import (
	"fmt"
	"math"
)

// cutLong ends every iteration running on GPU g that is longer than
// IterationS (a job that had its lane to itself) at its next iteration
// boundary, so that a job that just joined a lane on g takes its turn,
// and lanes drained for a merge fall idle, where they would have.
func (s *simulator) cutLong(g int) {
	s.touch(g)
	q := s.cfg.IterationS
	for _, j := range s.gpus[g].running {
		if j.iterLen <= q {
			continue
		}
		done := j.iterLen - j.iterLeft
		cut := max(q, math.Ceil(done/q-1e-6)*q)
		if cut < j.iterLen {
			j.iterLeft -= j.iterLen - cut
			j.iterLen = cut
		}
	}
}

// grant starts the iterations the lanes grant now.
func (s *simulator) grant() error {
	for _, gr := range s.pool.Grant(s.now) {
		j := s.byID[gr.Job]
		if j == nil || !j.shared || j.done {
			return fmt.Errorf("grant to job %d, which is not running in lanes", gr.Job)
		}
		s.touch(j.gpu)
		j.iterLen = min(s.cfg.IterationS, j.work)
		if gr.LaneJobs == 1 && !s.unbatched {
			j.iterLen = j.work
		}
		j.iterLeft = j.iterLen
		s.gpus[j.gpu].running = append(s.gpus[j.gpu].running, j)
		s.res.Iterations++
	}
	return nil
}

// touch brings GPU g's running iterations up to now at its current
// speed and marks it for retiming.
func (s *simulator) touch(g int) {
	st := &s.gpus[g]
	if dt := s.now - st.last; dt > 0 {
		for _, j := range st.running {
			j.iterLeft = max(0, j.iterLeft-st.rate*dt)
		}
	}
	st.last = s.now
	st.dirty = true
}

// retime sets the speed of every GPU that changed and moves the ends of
// its running iterations. The running iterations share the GPU's compute:
// each runs at full speed while their shares sum to at most one GPU, and
// all slow down in proportion beyond; ShareSlowdown applies while the GPU
// hosts more than one job.
func (s *simulator) retime() {
	for g := range s.gpus {
		st := &s.gpus[g]
		if !st.dirty {
			continue
		}
		st.dirty = false
		var demand float64
		for _, j := range st.running {
			demand += j.share
		}
		st.rate = Rate(demand, st.hosted, s.cfg.ShareSlowdown)
		for _, j := range st.running {
			j.ver++
			s.ev.push(s.now+j.iterLeft/st.rate, j)
		}
	}
}
