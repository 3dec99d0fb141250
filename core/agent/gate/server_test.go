package gate

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
)

// Memory on 8 GiB GPUs. Padded (x1.1 on P, x1.05 on the total):
// wide is P 1100 + E 4255 MiB, so a second wide job joins the first's
// lane; narrow is P 1100 + E 1105 MiB, so two narrow jobs get a lane
// each.
var (
	wide   = memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 4000, Source: memest.Declared}
	narrow = memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 1000, Source: memest.Declared}
)

const gpuMiB = 8192

// quiet is a logger that drops everything.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newServer starts a gate with GPUs of the given capacities. The socket
// lives in a short temporary folder: socket paths are limited.
func newServer(t *testing.T, caps []int64, cfg Config) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "gate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg.Path, cfg.CapacitiesMiB = filepath.Join(dir, "g.sock"), caps
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// add adds job id and returns its token.
func add(t *testing.T, s *Server, id int64, mem memest.Estimate, gpus ...int) string {
	t.Helper()
	tok, err := s.Add(Job{ID: id, GPUs: gpus, Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// client speaks the protocol, as a job would.
type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, s *Server) *client {
	t.Helper()
	c, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

// connect dials and says hello as job id.
func connect(t *testing.T, s *Server, id int64, token string) *client {
	t.Helper()
	c := dial(t, s)
	if r := c.call(Request{Op: OpHello, Job: id, Token: token}); !r.OK {
		t.Fatalf("hello of job %d refused: %s", id, r.Error)
	}
	return c
}

func (c *client) send(r Request) {
	c.t.Helper()
	r.V = Version
	b, _ := json.Marshal(r)
	if _, err := c.c.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads a reply, waiting at most d.
func (c *client) recv(d time.Duration) (Reply, error) {
	_ = c.c.SetReadDeadline(time.Now().Add(d))
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return Reply{}, err
	}
	var r Reply
	if err := json.Unmarshal(line, &r); err != nil {
		return Reply{}, fmt.Errorf("reply %q: %w", line, err)
	}
	return r, nil
}

func (c *client) call(r Request) Reply {
	c.t.Helper()
	c.send(r)
	rep, err := c.recv(10 * time.Second)
	if err != nil {
		c.t.Fatalf("%s: %v", r.Op, err)
	}
	return rep
}

func (c *client) acquire(e int64) Reply {
	c.t.Helper()
	return c.call(Request{Op: OpAcquire, ExpectedEMiB: e})
}
func (c *client) release(peak int64) Reply {
	c.t.Helper()
	return c.call(Request{Op: OpRelease, PeakEMiB: peak})
}

// blocked checks that no reply comes within a short while.
func (c *client) blocked() {
	c.t.Helper()
	if r, err := c.recv(150 * time.Millisecond); err == nil {
		c.t.Fatalf("got %+v, want to wait", r)
	}
}

// granted reads the reply to an acquire sent earlier.
func (c *client) granted() Reply {
	c.t.Helper()
	r, err := c.recv(10 * time.Second)
	if err != nil || !r.OK || r.Op != OpAcquire {
		c.t.Fatalf("acquire: %+v, %v; want granted", r, err)
	}
	return r
}

// closed checks that the server ended the connection.
func (c *client) closed() {
	c.t.Helper()
	if r, err := c.recv(5 * time.Second); !errors.Is(err, io.EOF) {
		c.t.Fatalf("got %+v, %v; want the connection closed", r, err)
	}
}

func TestHelloSaysWhatTheJobGets(t *testing.T) {
	s := newServer(t, []int64{gpuMiB, gpuMiB}, Config{Lanes: lanes.Config{Policy: lanes.Fair}})
	tok := add(t, s, 7, wide, 1)
	c := dial(t, s)
	r := c.call(Request{Op: OpHello, Job: 7, Token: tok})
	if !r.OK || r.V != Version || r.Job != 7 || len(r.GPUs) != 1 || r.GPUs[0] != 1 || r.Policy != "fair" {
		t.Fatalf("hello = %+v", r)
	}
	if a := c.acquire(0); !a.OK || a.LaneMiB != 4255 || a.LaneJobs != 1 {
		t.Fatalf("acquire = %+v, want the lane of 4255 MiB to itself", a)
	}
	if r := c.release(3000); !r.OK || r.EMiB != 4255 {
		t.Fatalf("release = %+v", r)
	}
}

// Two jobs in one lane: while one runs an iteration, the other waits,
// and it runs as soon as the first releases.
func TestOneLaneRunsOneIterationAtATime(t *testing.T) {
	s := newServer(t, []int64{gpuMiB}, Config{})
	a := connect(t, s, 1, add(t, s, 1, wide, 0))
	b := connect(t, s, 2, add(t, s, 2, wide, 0))
	if v := s.View()[0]; len(v.Lanes) != 1 || len(v.Lanes[0].Jobs) != 2 {
		t.Fatalf("lanes = %+v, want one lane of two jobs", v.Lanes)
	}
	if r := a.acquire(4000); !r.OK || r.LaneJobs != 2 {
		t.Fatalf("a acquire = %+v", r)
	}
	b.send(Request{Op: OpAcquire, ExpectedEMiB: 4000})
	b.blocked()
	if v := s.View()[0].Lanes[0]; v.Running != 1 {
		t.Errorf("running = %d, want job 1", v.Running)
	}
	if r := a.release(3900); !r.OK {
		t.Fatalf("a release = %+v", r)
	}
	b.granted()
	// pack: a is first in the lane, but b holds it now.
	a.send(Request{Op: OpAcquire})
	a.blocked()
	b.release(0)
	a.granted()
}

// Many iterations of several jobs in one lane, as fast as they go: at no
// moment do two run at once.
func TestOneLaneNeverOverlaps(t *testing.T) {
	for _, policy := range lanes.Policies() {
		t.Run(string(policy), func(t *testing.T) {
			s := newServer(t, []int64{gpuMiB}, Config{Lanes: lanes.Config{Policy: policy}})
			const jobs, iterations = 3, 30
			var inside, overlaps, total atomic.Int64
			var wg sync.WaitGroup
			for id := int64(1); id <= jobs; id++ {
				c := connect(t, s, id, add(t, s, id, wide, 0))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range iterations {
						if r := c.acquire(0); !r.OK {
							t.Errorf("acquire: %+v", r)
							return
						}
						if inside.Add(1) > 1 {
							overlaps.Add(1)
						}
						time.Sleep(100 * time.Microsecond)
						inside.Add(-1)
						total.Add(1)
						c.release(0)
					}
				}()
			}
			wg.Wait()
			if overlaps.Load() != 0 || total.Load() != jobs*iterations {
				t.Errorf("%d overlapping iterations, %d run; want 0 and %d", overlaps.Load(), total.Load(), jobs*iterations)
			}
		})
	}
}

// Jobs in different lanes run their iterations at the same time.
func TestTwoLanesRunTogether(t *testing.T) {
	s := newServer(t, []int64{gpuMiB}, Config{})
	a := connect(t, s, 1, add(t, s, 1, narrow, 0))
	b := connect(t, s, 2, add(t, s, 2, narrow, 0))
	if n := len(s.View()[0].Lanes); n != 2 {
		t.Fatalf("%d lanes, want 2", n)
	}
	a.acquire(0)
	if r := b.acquire(0); !r.OK || r.LaneJobs != 1 {
		t.Fatalf("b acquire while a runs = %+v", r)
	}
	a.release(0)
	b.release(0)
}

func TestOutgrowingTheLaneStopsTheJob(t *testing.T) {
	tests := []struct {
		name     string
		expected int64 // E asked for at acquire
		peak     int64 // peak reported at release
		measured bool
		wantE    int64 // E to run again with
	}{
		{"measured peak above the lane", 0, 6000, true, 6000},
		// Two wide jobs hold 2,200 MiB of P and a lane of 4,255: the lane
		// can grow to 5,992 MiB, not 6,000.
		{"expected E the lane cannot grow to", 6000, 0, false, 6000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stops := make(chan *ExceededError, 4)
			s := newServer(t, []int64{gpuMiB}, Config{Stop: func(id int64, err *ExceededError) { stops <- err }})
			a := connect(t, s, 1, add(t, s, 1, wide, 0))
			b := connect(t, s, 2, add(t, s, 2, wide, 0))
			var r Reply
			if tc.measured {
				a.acquire(0)
				b.send(Request{Op: OpAcquire})
				r = a.release(tc.peak)
			} else {
				b.send(Request{Op: OpAcquire})
				r = a.acquire(tc.expected)
			}
			if r.OK || !r.Stop || !strings.Contains(r.Error, "outgrew its Salus lane") {
				t.Fatalf("reply = %+v, want stop", r)
			}
			var ex *ExceededError
			select {
			case ex = <-stops:
			case <-time.After(5 * time.Second):
				t.Fatal("Stop not called")
			}
			if !errors.Is(ex, lanes.ErrExceedsLane) || ex.Job != 1 || ex.GPU != 0 || ex.LaneMiB != 4255 || ex.Measured != tc.measured ||
				ex.Requeue.EphemeralMiB != tc.wantE || ex.Requeue.PersistentMiB != 1000 {
				t.Errorf("stop = %+v", ex)
			}
			// Its neighbour is not held up, and it gets no more iterations.
			b.granted()
			if r := a.acquire(0); !r.Stop {
				t.Errorf("acquire after the stop = %+v", r)
			}
			select {
			case ex := <-stops:
				t.Errorf("Stop called twice: %v", ex)
			case <-time.After(50 * time.Millisecond):
			}
		})
	}
}

// A job that asks for more than its lane holds gets it where the GPU
// has room: its lane grows, and the job runs.
func TestAnAskGrowsTheLane(t *testing.T) {
	s := newServer(t, []int64{gpuMiB}, Config{Stop: func(id int64, err *ExceededError) { t.Errorf("job %d stopped: %v", id, err) }})
	a := connect(t, s, 1, add(t, s, 1, wide, 0))
	if r := a.acquire(5000); !r.OK || r.LaneMiB != 5000 {
		t.Fatalf("acquire(5000) = %+v, want granted in a lane grown to 5,000 MiB", r)
	}
	a.release(1000)
}

// Issue 15: a job that asks for 4,096 MiB before every iteration and
// measures peaks near 1,000 keeps a lane of at least 4,096: its lane is
// never shrunk below its ask, so no ask exceeds it, and it is never
// stopped. What it reports when its run ends (Measured) covers the ask
// too, for its next run.
func TestAConstantAskIsHonoured(t *testing.T) {
	s := newServer(t, []int64{gpuMiB}, Config{Stop: func(id int64, err *ExceededError) { t.Errorf("job %d stopped: %v", id, err) }})
	a := connect(t, s, 1, add(t, s, 1, wide, 0))
	for i := range 10 {
		r := a.acquire(4096)
		if !r.OK || r.LaneMiB < 4096 {
			t.Fatalf("iteration %d: acquire = %+v, want a lane of at least 4,096 MiB", i, r)
		}
		a.release(1000 + int64(i%3)*20)
	}
	est, ok := s.Measured(1)
	if !ok || est.EphemeralMiB != 4096 || est.Source != memest.Measured {
		t.Fatalf("measured %+v, %v; want E 4,096 (the ask), measured", est, ok)
	}
}

func TestRefusesWhoIsNotTheJob(t *testing.T) {
	var seenPID atomic.Int64
	s := newServer(t, []int64{gpuMiB}, Config{Authorize: func(job int64, pid int) error {
		seenPID.Store(int64(pid))
		if job == 3 {
			return errors.New("not in the job's process group")
		}
		return nil
	}})
	tok1 := add(t, s, 1, narrow, 0)
	add(t, s, 2, narrow, 0)
	tok3 := add(t, s, 3, narrow, 0)
	connect(t, s, 1, tok1)
	tests := []struct {
		name    string
		line    string
		wantErr string
	}{
		{"no token", `{"v":1,"op":"hello","job":2}`, "token"},
		{"another job's token", `{"v":1,"op":"hello","job":2,"token":"` + tok1 + `"}`, "wrong token"},
		{"a guessed token", `{"v":1,"op":"hello","job":2,"token":"` + strings.Repeat("0", 64) + `"}`, "wrong token"},
		{"an unknown job", `{"v":1,"op":"hello","job":99,"token":"` + tok1 + `"}`, "unknown job"},
		{"the right token from a stranger's process", `{"v":1,"op":"hello","job":3,"token":"` + tok3 + `"}`, "may not speak for job 3"},
		{"a second connection", `{"v":1,"op":"hello","job":1,"token":"` + tok1 + `"}`, "already has a connection"},
		{"acquire before hello", `{"v":1,"op":"acquire"}`, "first message must be a hello"},
		{"another version", `{"v":2,"op":"hello","job":1,"token":"` + tok1 + `"}`, "version 2"},
		{"garbage", `GET / HTTP/1.0`, "invalid character"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, s)
			if _, err := io.WriteString(c.c, tc.line+"\n"); err != nil {
				t.Fatal(err)
			}
			r, err := c.recv(5 * time.Second)
			if err != nil || r.OK || !strings.Contains(r.Error, tc.wantErr) {
				t.Fatalf("reply = %+v, %v; want refused with %q", r, err, tc.wantErr)
			}
			c.closed()
		})
	}
	if got := seenPID.Load(); got != int64(os.Getpid()) {
		t.Errorf("Authorize saw PID %d, want this process's %d", got, os.Getpid())
	}
}

func TestProtocolErrorsEndTheConnection(t *testing.T) {
	tests := []struct {
		name string
		do   func(c *client)
	}{
		{"release before acquire", func(c *client) { c.send(Request{Op: OpRelease}) }},
		{"acquire twice", func(c *client) { c.acquire(0); c.send(Request{Op: OpAcquire}) }},
		{"hello twice", func(c *client) { c.send(Request{Op: OpHello, Job: 1, Token: "x"}) }},
		{"a line too long", func(c *client) { _, _ = io.WriteString(c.c, strings.Repeat("x", 2*MaxLineBytes)+"\n") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, []int64{gpuMiB}, Config{})
			c := connect(t, s, 1, add(t, s, 1, narrow, 0))
			tc.do(c)
			for {
				r, err := c.recv(5 * time.Second)
				// A reset when the gate closed with the rest of a long
				// line unread.
				if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
					break
				}
				if err != nil || r.OK {
					t.Fatalf("reply = %+v, %v; want an error, then the end", r, err)
				}
			}
			// The job may connect again, and its lane works.
			c = connect(t, s, 1, s.jobs[1].token)
			c.acquire(0)
			c.release(0)
		})
	}
}

// A job whose run ends, or whose connection drops, frees its lane at once.
func TestLeavingFreesTheLane(t *testing.T) {
	tests := []struct {
		name  string
		leave func(s *Server, a *client)
	}{
		{"removed", func(s *Server, a *client) { s.Remove(1) }},
		{"disconnected", func(s *Server, a *client) { a.c.Close() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, []int64{gpuMiB}, Config{})
			a := connect(t, s, 1, add(t, s, 1, wide, 0))
			b := connect(t, s, 2, add(t, s, 2, wide, 0))
			a.acquire(0)
			b.send(Request{Op: OpAcquire})
			b.blocked()
			tc.leave(s, a)
			b.granted()
		})
	}
}

// A job that drops its connection while it waits for an iteration does
// not keep the lane when its turn comes, and may connect again.
func TestDisconnectWhileWaiting(t *testing.T) {
	s := newServer(t, []int64{gpuMiB}, Config{Lanes: lanes.Config{Policy: lanes.Pack}})
	tokA := add(t, s, 1, wide, 0)
	a := connect(t, s, 1, tokA)
	b := connect(t, s, 2, add(t, s, 2, wide, 0))
	b.acquire(0)
	a.send(Request{Op: OpAcquire})
	a.blocked()
	a.c.Close()
	time.Sleep(50 * time.Millisecond) // let the gate see it
	b.release(0)
	if r := b.acquire(0); !r.OK {
		t.Fatalf("b acquire = %+v", r)
	}
	a = connect(t, s, 1, tokA)
	a.send(Request{Op: OpAcquire})
	a.blocked()
	b.release(0)
	a.granted()
}

// A job that does not fit yet is added, and its first iteration waits
// until room is made.
func TestAdmissionWaitsForRoom(t *testing.T) {
	s := newServer(t, []int64{gpuMiB}, Config{})
	big := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 6000}
	add(t, s, 1, big, 0)
	b := connect(t, s, 2, add(t, s, 2, narrow, 0))
	b.send(Request{Op: OpAcquire})
	b.blocked()
	s.Remove(1)
	b.granted()
	if _, err := s.Add(Job{ID: 3, GPUs: []int{0}, Memory: memest.Estimate{PersistentMiB: 9000}}); !errors.Is(err, lanes.ErrTooLarge) {
		t.Errorf("a job larger than the GPU: %v", err)
	}
	if _, err := s.Add(Job{ID: 2, GPUs: []int{0}, Memory: narrow}); !errors.Is(err, lanes.ErrDuplicate) {
		t.Errorf("a job added twice: %v", err)
	}
	if _, err := s.Add(Job{ID: 4, GPUs: []int{1}, Memory: narrow}); err == nil {
		t.Error("a GPU the machine lacks: no error")
	}
}

// Jobs on several GPUs share lanes with jobs on one: every lane runs one
// iteration at a time, and nobody waits forever.
func TestSeveralGPUsNoOverlapNoDeadlock(t *testing.T) {
	s := newServer(t, []int64{gpuMiB, gpuMiB}, Config{Lanes: lanes.Config{Policy: lanes.Fair}})
	// P 550 + E 5278 padded: every job of a GPU shares its one lane.
	mem := memest.Estimate{PersistentMiB: 500, EphemeralMiB: 5000}
	sets := map[int64][]int{1: {0, 1}, 2: {1, 0}, 3: {1}, 4: {0}}
	var inside [2]atomic.Int64
	var overlaps, total atomic.Int64
	const iterations = 25
	var wg sync.WaitGroup
	for id, gpus := range sets {
		c := connect(t, s, id, add(t, s, id, mem, gpus...))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range iterations {
				if r := c.acquire(0); !r.OK {
					t.Errorf("job %d acquire: %+v", id, r)
					return
				}
				for _, g := range gpus {
					if inside[g].Add(1) > 1 {
						overlaps.Add(1)
					}
				}
				time.Sleep(100 * time.Microsecond)
				for _, g := range gpus {
					inside[g].Add(-1)
				}
				total.Add(1)
				c.release(0)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("deadlock: %d iterations run; lanes %+v", total.Load(), s.View())
	}
	if overlaps.Load() != 0 || total.Load() != int64(len(sets)*iterations) {
		t.Errorf("%d overlaps, %d iterations; want 0 and %d", overlaps.Load(), total.Load(), len(sets)*iterations)
	}
	for _, v := range s.View() {
		if len(v.Lanes) != 1 {
			t.Errorf("GPU %d has %d lanes, want 1", v.Index, len(v.Lanes))
		}
	}
}

func TestListen(t *testing.T) {
	dir, err := os.MkdirTemp("", "gate")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "g.sock")
	cfg := Config{Path: path, CapacitiesMiB: []int64{gpuMiB}, Logger: quiet}

	// A socket left by an agent that died is replaced.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	s, err := Listen(cfg)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	if _, err := Listen(cfg); err == nil || !strings.Contains(err.Error(), "another agent") {
		t.Errorf("a second gate on the same socket: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("socket mode: %v, %v", fi, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(Job{ID: 1, GPUs: []int{0}, Memory: narrow}); !errors.Is(err, ErrClosed) {
		t.Errorf("Add after Close: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after Close: %v", err)
	}
	bad := []Config{
		{Path: filepath.Join(dir, strings.Repeat("x", MaxPathBytes)), CapacitiesMiB: []int64{1}},
		{Path: path},
		{Path: path, CapacitiesMiB: []int64{1}, Lanes: lanes.Config{Policy: "lifo"}},
	}
	for _, c := range bad {
		if s, err := Listen(c); err == nil {
			s.Close()
			t.Errorf("Listen(%+v): no error", c)
		}
	}
}
