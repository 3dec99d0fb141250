package gate

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
)

// MaxPathBytes is the longest socket path the kernel accepts.
const MaxPathBytes = 107

// ErrClosed is returned by Add after Close.
var ErrClosed = errors.New("gate closed")

// Job is a job that opted in to sharing its GPUs on this machine.
type Job struct {
	ID int64
	// GPUs are the job's GPUs on this machine, by index. A job on several
	// GPUs runs an iteration once it holds its lane on each of them; it
	// takes them in index order, so that two such jobs never wait for
	// each other.
	GPUs []int
	// Memory is the job's estimate on each of its GPUs, unpadded: the
	// lanes pad it at admission (lanes.Config.Padding).
	Memory memest.Estimate
	// DurationS and Iterations are what the job declared, for the srtf
	// policy (see lanes.Job); 0 when unknown.
	DurationS  float64
	Iterations int64
}

// Config sets up a Server.
type Config struct {
	// Path is the socket's path, at most MaxPathBytes long. A socket left
	// there by an agent that died is replaced.
	Path string
	// CapacitiesMiB is the memory of each of the machine's GPUs, by index.
	// Each GPU has its own lanes (a lanes.Pool of one GPU).
	CapacitiesMiB []int64
	// Lanes configures the lanes: the iteration policy, padding, aging.
	Lanes lanes.Config
	// Authorize checks that process pid, which connected and presented
	// job's token, belongs to job; nil trusts the token alone. pid is 0
	// where the system cannot tell who connected.
	Authorize func(job int64, pid int) error
	// Stop is called once for a job that outgrew its lane, just before
	// the job is told: the caller stops the job and submits it again
	// with err.Requeue. It runs without the Server's lock.
	Stop   func(job int64, err *ExceededError)
	Logger *slog.Logger
}

// ExceededError says that a job outgrew its lane: it expected, or
// measured, more ephemeral memory than its lane holds. It gets no more
// iterations; it must stop and run again with Requeue.
type ExceededError struct {
	Job int64
	GPU int
	// LaneMiB is the lane's size; NeedMiB the job's expected E, or its
	// measured peak when Measured is set.
	LaneMiB  int64
	NeedMiB  int64
	Measured bool
	// Requeue is the unpadded estimate to submit the job again with.
	Requeue memest.Estimate
}

// Error says what the job did and what to run it again with.
func (e *ExceededError) Error() string {
	what := "expected an ephemeral memory of"
	if e.Measured {
		what = "measured an ephemeral peak of"
	}
	return fmt.Sprintf("job %d outgrew its Salus lane on GPU %d: it %s %d MiB, the lane holds %d MiB; run it again with P %d MiB, E %d MiB",
		e.Job, e.GPU, what, e.NeedMiB, e.LaneMiB, e.Requeue.PersistentMiB, e.Requeue.EphemeralMiB)
}

// Unwrap makes errors.Is(err, lanes.ErrExceedsLane) hold.
func (e *ExceededError) Unwrap() error { return lanes.ErrExceedsLane }

// Server grants iterations to the jobs of one machine that opted in.
type Server struct {
	cfg   Config
	ln    *net.UnixListener
	epoch time.Time
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	mu     sync.Mutex
	pools  []*lanes.Pool // one per GPU, by index
	jobs   map[int64]*job
	conns  map[*net.UnixConn]struct{}
	closed bool
}

// job is a job's state at the gate. A job asks for an iteration (want),
// then requests its lane on each of its GPUs in index order (pending is
// the position in GPUs of the request outstanding); the iteration runs
// once every lane is held.
type job struct {
	Job
	token    string
	conn     bool // a connection speaks for the job
	want     bool // that connection waits for, or runs, an iteration
	expected int64
	pending  int    // position in GPUs of the outstanding lane request, -1: none
	orphan   bool   // the pending request's connection is gone: end its grant at once
	held     []bool // position i's lane is granted
	stop     *ExceededError
	stopSent bool
	fail     error // an error of the lane manager: the connection ends
	gone     bool  // removed
	wake     chan struct{}
	seen     *memest.Tracker // the job's peaks, unpadded (Measured)
}

func (j *job) anyHeld() bool { return slices.Contains(j.held, true) }

func (j *job) allHeld() bool { return !slices.Contains(j.held, false) }

// notify wakes the connection that speaks for j, if it waits.
func (j *job) notify() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// Listen starts a Server on cfg.Path. Close stops it.
func Listen(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Path == "" || len(cfg.Path) > MaxPathBytes {
		return nil, fmt.Errorf("gate socket %q: the path must have 1 to %d bytes; choose a shorter work folder", cfg.Path, MaxPathBytes)
	}
	if len(cfg.CapacitiesMiB) == 0 {
		return nil, errors.New("gate: no GPUs")
	}
	s := &Server{cfg: cfg, epoch: time.Now(), done: make(chan struct{}),
		jobs: make(map[int64]*job), conns: make(map[*net.UnixConn]struct{})}
	for i, c := range cfg.CapacitiesMiB {
		p, err := lanes.NewPool([]int64{c}, cfg.Lanes)
		if err != nil {
			return nil, fmt.Errorf("gate GPU %d: %w", i, err)
		}
		s.pools = append(s.pools, p)
	}
	if err := removeStale(cfg.Path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: cfg.Path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	// Jobs may run as another user than the agent: anyone may connect,
	// and only a job's token, from a process of the job, is accepted.
	if err := os.Chmod(cfg.Path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("gate: %w", err)
	}
	s.ln = ln
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// removeStale removes a socket at path that nobody serves any more.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("gate: %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("gate: another agent serves %s", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("gate: stale socket: %w", err)
	}
	return nil
}

// Path is the socket's path, for the jobs' GPUPORTAL_GATE.
func (s *Server) Path() string { return s.cfg.Path }

// Close stops serving: it closes the socket and every connection, and
// waits for them to end. Jobs still added keep their lanes until removed.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.ln.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	if err != nil {
		return fmt.Errorf("gate close: %w", err)
	}
	return nil
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			select {
			case <-s.done:
				return
			case <-time.After(50 * time.Millisecond): // out of files, say
			}
			s.cfg.Logger.Warn("gate accept", "err", err)
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// Add admits a job to the lanes of its GPUs and returns the token it
// must present. A job that does not fit yet waits (its iterations wait
// with it) until the jobs before it leave. Add fails when the job's
// padded memory exceeds a GPU (lanes.ErrTooLarge), when it is already
// added, and on GPUs the machine does not have.
func (s *Server) Add(j Job) (token string, err error) {
	if len(j.GPUs) == 0 {
		return "", fmt.Errorf("gate add job %d: no GPUs", j.ID)
	}
	j.GPUs = slices.Sorted(slices.Values(j.GPUs))
	for i, g := range j.GPUs {
		if g < 0 || g >= len(s.cfg.CapacitiesMiB) || (i > 0 && j.GPUs[i-1] == g) {
			return "", fmt.Errorf("gate add job %d: GPUs %v on a machine of %d", j.ID, j.GPUs, len(s.cfg.CapacitiesMiB))
		}
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", fmt.Errorf("gate add job %d: token: %w", j.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", fmt.Errorf("gate add job %d: %w", j.ID, ErrClosed)
	}
	if _, ok := s.jobs[j.ID]; ok {
		return "", fmt.Errorf("gate add job %d: %w", j.ID, lanes.ErrDuplicate)
	}
	lj := lanes.Job{ID: j.ID, Memory: j.Memory, DurationS: j.DurationS, Iterations: j.Iterations}
	now := s.now()
	for k, g := range j.GPUs {
		if err := s.pools[g].Submit(lj, now); err != nil {
			for _, h := range j.GPUs[:k] {
				_ = s.pools[h].Cancel(j.ID)
			}
			return "", fmt.Errorf("gate add job %d on GPU %d: %w", j.ID, g, err)
		}
	}
	s.jobs[j.ID] = &job{Job: j, token: hex.EncodeToString(secret), pending: -1,
		held: make([]bool, len(j.GPUs)), wake: make(chan struct{}, 1),
		seen: memest.NewTracker(j.Memory, memest.NoPadding)}
	s.pump()
	return s.jobs[j.ID].token, nil
}

// Remove takes a job out of its lanes, abandoning any iteration it runs,
// and ends its connection. Removing a job that is not there does nothing.
func (s *Server) Remove(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return
	}
	for _, g := range j.GPUs {
		if _, admitted := s.pools[g].Where(id); admitted {
			_ = s.pools[g].Release(id)
		} else {
			_ = s.pools[g].Cancel(id)
		}
	}
	delete(s.jobs, id)
	j.gone, j.want, j.pending, j.orphan = true, false, -1, false
	clear(j.held)
	j.notify()
	s.pump()
}

// View returns the lanes of every GPU, by index.
func (s *Server) View() []lanes.GPUView {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]lanes.GPUView, len(s.pools))
	for i, p := range s.pools {
		out[i] = p.View()[0]
		out[i].Index = i
	}
	return out
}

// now is the lanes' clock: seconds since the Server started.
func (s *Server) now() float64 { return time.Since(s.epoch).Seconds() }

// pump moves every job as far as it goes: it admits waiting jobs, makes
// the lane requests of jobs that asked for an iteration, and hands out
// grants. A job takes its GPUs' lanes in index order; one that holds
// them all runs its iteration, and its connection is woken. A grant for
// a job whose connection went away is ended at once. The caller holds
// s.mu.
func (s *Server) pump() {
	now := s.now()
	for {
		for _, p := range s.pools {
			p.Schedule(now)
		}
		for _, id := range slices.Sorted(maps.Keys(s.jobs)) {
			j := s.jobs[id]
			if j.want && j.pending < 0 && !j.anyHeld() && j.stop == nil && j.fail == nil && s.admitted(j) {
				s.request(j, 0, now)
			}
		}
		again := false
		for g, p := range s.pools {
			for _, gr := range p.Grant(now) {
				j := s.jobs[gr.Job]
				if j == nil || j.pending < 0 || j.GPUs[j.pending] != g {
					s.cfg.Logger.Error("gate: grant to a job that did not ask", "job", gr.Job, "gpu", g)
					_, _ = p.Finish(gr.Job, now, 0)
					continue
				}
				k := j.pending
				j.pending, j.held[k] = -1, true
				switch {
				case j.orphan || !j.want:
					j.orphan = false
					s.finishHeld(j, now, 0)
					again = true
				case k+1 < len(j.GPUs):
					s.request(j, k+1, now)
				default:
					j.notify()
				}
			}
		}
		if !again {
			return
		}
	}
}

// request asks for j's lane on its GPU at position k. The lane grows to
// what the job expects where the GPU has room, and never shrinks below
// it again; a job that expects more than its lane can hold is told to
// stop, and comes back with an estimate that covers its ask.
func (s *Server) request(j *job, k int, now float64) {
	g := j.GPUs[k]
	j.seen.Expect(j.expected)
	err := s.pools[g].Request(j.ID, j.expected)
	if err == nil {
		j.pending = k
		return
	}
	if errors.Is(err, lanes.ErrExceedsLane) {
		size, _ := laneOf(s.pools[g], j.ID)
		j.stop = &ExceededError{Job: j.ID, GPU: g, LaneMiB: size, NeedMiB: j.expected, Requeue: j.seen.Requeue()}
	} else {
		j.fail = fmt.Errorf("job %d GPU %d: %w", j.ID, g, err)
		s.cfg.Logger.Error("gate: lane request failed", "job", j.ID, "gpu", g, "err", err)
	}
	j.want = false
	s.finishHeld(j, now, 0)
	j.notify()
}

// release ends j's iteration, which it asked for and holds on every
// lane, with its measured peak (see finishHeld), marks j to be stopped
// when the peak exceeded a lane, and lets the next iterations run. The
// caller holds s.mu and, if exceeded is not nil, has j stopped.
func (s *Server) release(j *job, peak int64) (eMiB int64, tight bool, exceeded *ExceededError) {
	eMiB, tight, exceeded = s.finishHeld(j, s.now(), peak)
	j.want = false
	if exceeded != nil {
		j.stop = exceeded
	}
	s.pump()
	return eMiB, tight, exceeded
}

// finishHeld ends the iteration on every lane j holds, with the measured
// peak, and returns the largest E j holds after, whether a lane was too
// tight to grow, and the first lane the peak exceeded.
func (s *Server) finishHeld(j *job, now float64, peak int64) (eMiB int64, tight bool, exceeded *ExceededError) {
	if j.anyHeld() {
		j.seen.Observe(peak)
	}
	for k, h := range j.held {
		if !h {
			continue
		}
		j.held[k] = false
		g := j.GPUs[k]
		f, err := s.pools[g].Finish(j.ID, now, peak)
		if err != nil {
			s.cfg.Logger.Error("gate: finish failed", "job", j.ID, "gpu", g, "err", err)
			continue
		}
		eMiB, tight = max(eMiB, f.EphemeralMiB), tight || f.Tight
		if f.Exceeded && exceeded == nil {
			size, _ := laneOf(s.pools[g], j.ID)
			exceeded = &ExceededError{Job: j.ID, GPU: g, LaneMiB: size, NeedMiB: peak, Measured: true, Requeue: f.Requeue}
		}
	}
	return eMiB, tight, exceeded
}

// admitted reports whether j has a lane on each of its GPUs.
func (s *Server) admitted(j *job) bool {
	for _, g := range j.GPUs {
		if _, ok := s.pools[g].Where(j.ID); !ok {
			return false
		}
	}
	return true
}

// laneOf returns the size of job id's lane and how many jobs share it.
func laneOf(p *lanes.Pool, id int64) (sizeMiB int64, jobs int) {
	for _, gv := range p.View() {
		for _, l := range gv.Lanes {
			for _, jv := range l.Jobs {
				if jv.ID == id {
					return l.SizeMiB, len(l.Jobs)
				}
			}
		}
	}
	return 0, 0
}
