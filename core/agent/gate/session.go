package gate

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/gpuportal/gpuportal/core/lanes"
)

// Timeouts of a connection.
const (
	// helloTimeout is how long a new connection has to say hello.
	helloTimeout = 10 * time.Second
	// writeTimeout bounds writing one reply to a job that does not read.
	writeTimeout = 10 * time.Second
)

// session is one connection.
type session struct {
	s     *Server
	c     *net.UnixConn
	lines chan []byte   // the requests read, closed when reading ends
	quit  chan struct{} // closed when the session ends
	// readErr is why reading ended; set before lines is closed.
	readErr error
}

// serve speaks the protocol on c until either side ends it.
func (s *Server) serve(c *net.UnixConn) {
	defer s.wg.Done()
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	ss := &session{s: s, c: c, lines: make(chan []byte), quit: make(chan struct{})}
	defer close(ss.quit)
	go ss.read()

	timer := time.NewTimer(helloTimeout)
	defer timer.Stop()
	var line []byte
	select {
	case l, ok := <-ss.lines:
		if !ok {
			ss.ended()
			return
		}
		line = l
	case <-timer.C:
		ss.fail(OpHello, fmt.Errorf("%w: no hello within %s", ErrProtocol, helloTimeout))
		return
	case <-s.done:
		return
	}
	j := ss.hello(line)
	if j == nil {
		return
	}
	defer s.disconnect(j)
	for {
		select {
		case line, ok := <-ss.lines:
			if !ok {
				ss.ended()
				return
			}
			req, err := ParseRequest(line)
			if err != nil {
				ss.fail("", err)
				return
			}
			keep := false
			switch req.Op {
			case OpHello:
				ss.fail(OpHello, fmt.Errorf("%w: hello twice", ErrProtocol))
			case OpAcquire:
				keep = ss.acquire(j, req)
			case OpRelease:
				keep = ss.release(j, req)
			}
			if !keep {
				return
			}
		case <-j.wake:
			s.mu.Lock()
			gone := j.gone
			s.mu.Unlock()
			if gone {
				return
			}
		case <-s.done:
			return
		}
	}
}

// read passes each line of the connection to ss.lines.
func (ss *session) read() {
	defer close(ss.lines)
	sc := bufio.NewScanner(ss.c)
	sc.Buffer(make([]byte, 0, 512), MaxLineBytes+1)
	for sc.Scan() {
		select {
		case ss.lines <- bytes.Clone(sc.Bytes()):
		case <-ss.quit:
			return
		}
	}
	ss.readErr = sc.Err()
	if ss.readErr != nil {
		ss.s.cfg.Logger.Debug("gate: connection ended", "err", ss.readErr)
	}
}

// ended says why reading ended, when the job broke the protocol.
func (ss *session) ended() {
	if errors.Is(ss.readErr, bufio.ErrTooLong) {
		ss.fail("", fmt.Errorf("%w: a message longer than %d bytes", ErrProtocol, MaxLineBytes))
	}
}

// hello authenticates the connection: the job must be added, the token
// its own, and, when Config.Authorize is set, the process that connected
// one of the job's. It returns the job, or nil after refusing.
func (ss *session) hello(line []byte) *job {
	s := ss.s
	req, err := ParseRequest(line)
	if err != nil {
		ss.fail(OpHello, err)
		return nil
	}
	if req.Op != OpHello {
		ss.fail(OpHello, fmt.Errorf("%w: the first message must be a hello, not %q", ErrProtocol, req.Op))
		return nil
	}
	pid, err := peerPID(ss.c)
	if err != nil {
		s.cfg.Logger.Debug("gate: no peer", "err", err)
		pid = 0
	}
	s.mu.Lock()
	j := s.jobs[req.Job]
	ok := j != nil && subtle.ConstantTimeCompare([]byte(j.token), []byte(req.Token)) == 1
	s.mu.Unlock()
	if !ok {
		s.cfg.Logger.Warn("gate: refused a connection: unknown job or wrong token", "job", req.Job, "pid", pid)
		ss.fail(OpHello, fmt.Errorf("job %d: unknown job or wrong token", req.Job))
		return nil
	}
	if s.cfg.Authorize != nil {
		if err := s.cfg.Authorize(req.Job, pid); err != nil {
			s.cfg.Logger.Warn("gate: refused a connection: not the job's process", "job", req.Job, "pid", pid, "err", err)
			ss.fail(OpHello, fmt.Errorf("process %d may not speak for job %d: %w", pid, req.Job, err))
			return nil
		}
	}
	s.mu.Lock()
	var refuse string
	switch {
	case j.gone:
		refuse = "the job's run ended"
	case j.conn:
		refuse = "the job already has a connection to the gate"
	default:
		j.conn = true
	}
	gpus := j.GPUs
	s.mu.Unlock()
	if refuse != "" {
		ss.fail(OpHello, fmt.Errorf("job %d: %s", req.Job, refuse))
		return nil
	}
	s.cfg.Logger.Debug("gate: job connected", "job", req.Job, "pid", pid)
	if err := ss.reply(Reply{Op: OpHello, OK: true, Job: req.Job, GPUs: gpus, Policy: s.policy()}); err != nil {
		s.disconnect(j)
		return nil
	}
	return j
}

// acquire waits until j may run an iteration and says so. It reports
// whether the connection goes on.
func (ss *session) acquire(j *job, req Request) bool {
	s := ss.s
	asked := time.Now()
	s.mu.Lock()
	var refuse error
	switch {
	case j.gone:
		refuse = fmt.Errorf("job %d: the job's run ended", j.ID)
	case j.stop != nil:
	case j.want || j.anyHeld():
		refuse = fmt.Errorf("%w: acquire twice: release the iteration first", ErrProtocol)
	default:
		j.want, j.expected = true, req.ExpectedEMiB
		s.pump()
	}
	s.mu.Unlock()
	if refuse != nil {
		ss.fail(OpAcquire, refuse)
		return false
	}
	for {
		s.mu.Lock()
		stop, fail, gone, running := j.stop, j.fail, j.gone, j.want && j.allHeld()
		rep := Reply{Op: OpAcquire, OK: true}
		if running {
			rep.LaneMiB, rep.LaneJobs = s.lanesOf(j)
		}
		s.mu.Unlock()
		switch {
		case stop != nil:
			return ss.stop(j, OpAcquire)
		case fail != nil:
			ss.fail(OpAcquire, fail)
			return false
		case gone:
			ss.fail(OpAcquire, fmt.Errorf("job %d: the job's run ended", j.ID))
			return false
		case running:
			rep.WaitedMS = time.Since(asked).Milliseconds()
			return ss.reply(rep) == nil
		}
		select {
		case <-j.wake:
		case _, ok := <-ss.lines:
			if ok {
				ss.fail(OpAcquire, fmt.Errorf("%w: a message while waiting for an iteration", ErrProtocol))
			}
			return false
		case <-s.done:
			return false
		}
	}
}

// release ends j's iteration with its measured peak. It reports whether
// the connection goes on.
func (ss *session) release(j *job, req Request) bool {
	s := ss.s
	s.mu.Lock()
	if j.gone || !j.want || !j.allHeld() {
		gone := j.gone
		s.mu.Unlock()
		if gone {
			ss.fail(OpRelease, fmt.Errorf("job %d: the job's run ended", j.ID))
		} else {
			ss.fail(OpRelease, fmt.Errorf("%w: release without an iteration", ErrProtocol))
		}
		return false
	}
	e, tight, exceeded := s.release(j, req.PeakEMiB)
	s.mu.Unlock()
	if exceeded != nil {
		return ss.stop(j, OpRelease)
	}
	return ss.reply(Reply{Op: OpRelease, OK: true, EMiB: e, Tight: tight}) == nil
}

// stop has the agent stop j, which outgrew its lane, and tells j. The
// agent hears first, so that it knows why the job ends however fast the
// job exits.
func (ss *session) stop(j *job, op Op) bool {
	ss.s.deliverStop(j)
	ss.s.mu.Lock()
	msg := j.stop.Error()
	ss.s.mu.Unlock()
	return ss.reply(Reply{Op: op, Error: msg, Stop: true}) == nil
}

// deliverStop calls Config.Stop once for a job told to stop.
func (s *Server) deliverStop(j *job) {
	s.mu.Lock()
	ex := j.stop
	send := ex != nil && !j.stopSent && !j.gone
	if send {
		j.stopSent = true
	}
	s.mu.Unlock()
	if !send {
		return
	}
	s.cfg.Logger.Warn("gate: job outgrew its lane: stopping it", "job", j.ID, "gpu", ex.GPU,
		"lane_mib", ex.LaneMiB, "need_mib", ex.NeedMiB, "measured", ex.Measured)
	if s.cfg.Stop != nil {
		s.cfg.Stop(j.ID, ex)
	}
}

// disconnect forgets j's connection: an iteration it runs ends now, and
// one it waits for ends as soon as it is granted.
func (s *Server) disconnect(j *job) {
	s.mu.Lock()
	j.conn, j.want = false, false
	if !j.gone {
		if j.pending >= 0 {
			j.orphan = true
		}
		s.finishHeld(j, s.now(), 0)
		s.pump()
	}
	s.mu.Unlock()
	s.deliverStop(j)
}

// lanesOf returns the smallest of j's lanes and the most jobs that share
// one. The caller holds s.mu.
func (s *Server) lanesOf(j *job) (sizeMiB int64, jobs int) {
	for i, g := range j.GPUs {
		size, n := laneOf(s.pools[g], j.ID)
		if i == 0 || size < sizeMiB {
			sizeMiB = size
		}
		jobs = max(jobs, n)
	}
	return sizeMiB, jobs
}

// policy is the lanes' iteration policy, defaults filled in.
func (s *Server) policy() string {
	p, err := lanes.ParsePolicy(string(s.cfg.Lanes.Policy))
	if err != nil {
		return string(s.cfg.Lanes.Policy)
	}
	return string(p)
}

// reply writes one reply.
func (ss *session) reply(r Reply) error {
	r.V = Version
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("gate reply: %w", err)
	}
	_ = ss.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := ss.c.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("gate reply: %w", err)
	}
	return nil
}

// fail writes an error reply; the connection ends after it.
func (ss *session) fail(op Op, err error) {
	_ = ss.reply(Reply{Op: op, Error: err.Error()})
}
