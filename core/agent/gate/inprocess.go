package gate

import (
	"context"
	"errors"
	"fmt"
)

// ErrNotAdded is returned by Acquire and Release for a job not added.
var ErrNotAdded = errors.New("job not added to the gate")

// Acquire waits until job id may run an iteration, as the socket's
// acquire does, for a job that runs inside the agent (a simulated job).
// expectedE is the iteration's expected ephemeral memory, 0 for the
// job's estimate. It returns the size of the job's lane and how many jobs
// share it. It fails with an *ExceededError (Config.Stop has then been
// called) when the job outgrew its lane, when the job is removed, or when
// ctx ends; an iteration granted after that is ended at once.
func (s *Server) Acquire(ctx context.Context, id int64, expectedE int64) (laneMiB int64, laneJobs int, err error) {
	s.mu.Lock()
	j := s.jobs[id]
	switch {
	case j == nil:
		err = fmt.Errorf("gate acquire job %d: %w", id, ErrNotAdded)
	case j.stop != nil:
	case j.want || j.anyHeld():
		err = fmt.Errorf("gate acquire job %d: %w: release the iteration first", id, ErrProtocol)
	default:
		j.want, j.expected = true, expectedE
		s.pump()
	}
	s.mu.Unlock()
	if err != nil {
		return 0, 0, err
	}
	for {
		s.mu.Lock()
		stop, fail, gone, running := j.stop, j.fail, j.gone, j.want && j.allHeld()
		if running {
			laneMiB, laneJobs = s.lanesOf(j)
		}
		s.mu.Unlock()
		switch {
		case stop != nil:
			s.deliverStop(j)
			return 0, 0, stop
		case fail != nil:
			return 0, 0, fail
		case gone:
			return 0, 0, fmt.Errorf("gate acquire job %d: the job's run ended", id)
		case running:
			return laneMiB, laneJobs, nil
		}
		select {
		case <-j.wake:
		case <-ctx.Done():
			s.disconnect(j)
			return 0, 0, fmt.Errorf("gate acquire job %d: %w", id, ctx.Err())
		case <-s.done:
			s.disconnect(j)
			return 0, 0, fmt.Errorf("gate acquire job %d: %w", id, ErrClosed)
		}
	}
}

// Release ends job id's iteration with its measured ephemeral peak (0:
// not measured), as the socket's release does. It returns an
// *ExceededError when the peak outgrew the lane (Config.Stop has then
// been called).
func (s *Server) Release(id int64, peakE int64) error {
	s.mu.Lock()
	j := s.jobs[id]
	if j == nil || !j.want || !j.allHeld() {
		s.mu.Unlock()
		if j == nil {
			return fmt.Errorf("gate release job %d: %w", id, ErrNotAdded)
		}
		return fmt.Errorf("gate release job %d: %w: release without an iteration", id, ErrProtocol)
	}
	_, _, exceeded := s.release(j, peakE)
	s.mu.Unlock()
	if exceeded != nil {
		s.deliverStop(j)
		return exceeded
	}
	return nil
}
