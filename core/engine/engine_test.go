package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/usage"
)

// memStore is an in-memory Store with the same rules as the real one.
type memStore struct {
	mu        sync.Mutex
	jobs      map[int64]*Job
	end       map[int64]*int // exit codes
	reason    map[int64]string
	forecasts []ForecastRecord         // recorded start forecasts
	fail      error                    // MarkStopped fails with it while set
	stalls    map[int64]int            // requeues without progress (sharing_test.go)
	waits     map[int64]string         // why waiting jobs wait (SetReasons)
	late      []lateSeen               // exits recorded late (lateexit_test.go)
	stoppedAt map[job.RunRef]time.Time // when each run's record ended (MarkStopped)

	nodeStateMem // the machines' state (nodestate_test.go)
	rsvMem       // the reservations (reserve_test.go)
}

func newMemStore(jobs ...Job) *memStore {
	s := &memStore{jobs: make(map[int64]*Job), end: make(map[int64]*int), reason: make(map[int64]string), stoppedAt: make(map[job.RunRef]time.Time)}
	for _, j := range jobs {
		if j.State == "" {
			j.State = job.Queued
		}
		if j.State == job.Running && j.Run == 0 {
			j.Run = 1 // the run fake nodes report
		}
		s.jobs[j.ID] = &j
	}
	return s
}

var errConflict = fmt.Errorf("memStore: %w", job.ErrConflict)

func (s *memStore) UnfinishedEngineJobs(context.Context) ([]Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Job
	for _, j := range s.jobs {
		if !j.State.Final() && !s.held(j) {
			out = append(out, *j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

func (s *memStore) MarkStarted(_ context.Context, id int64, placement []gpu.Ref, now time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if !j.State.Waiting() {
		return 0, errConflict
	}
	j.Run++
	j.State, j.Placement, j.LastStartAt, j.Accrual = job.Running, placement, &now, usage.Accrual{}
	return j.Run, nil
}

func (s *memStore) MarkResumed(_ context.Context, ref job.RunRef, placement []gpu.Ref, reason string, now time.Time) (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[ref.Job]
	if !j.State.Waiting() || j.Run != ref.Run {
		return time.Time{}, errConflict
	}
	from := now
	if e, ok := s.stoppedAt[ref]; ok && !e.After(now) && (j.LastStartAt == nil || !e.Before(*j.LastStartAt)) {
		from = e
	}
	j.State, j.Placement, j.LastStartAt, j.Accrual = job.Running, placement, &from, usage.Accrual{}
	s.reason[ref.Job] = reason
	return from, nil
}

// SetHeld records changes of the GPUs running jobs hold as the real store
// does (models.Store.SetHeld).
func (s *memStore) SetHeld(_ context.Context, changes []Held) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	for _, c := range changes {
		j, err := s.current(c.Ref)
		if err != nil {
			continue // the run ended: counted then
		}
		j.Accrual = j.accrual().Reheld(c.At.Sub(*j.LastStartAt).Seconds(), c.GPUs)
	}
	return nil
}

// current checks that ref is the job's current run; the caller holds mu.
func (s *memStore) current(ref job.RunRef) (*Job, error) {
	j := s.jobs[ref.Job]
	if j.State != job.Running || j.Run != ref.Run {
		return nil, errConflict
	}
	return j, nil
}

func (s *memStore) MarkStopped(_ context.Context, ref job.RunRef, to job.State, code *int, reason string, handover usage.Service, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	id := ref.Job
	j, err := s.current(ref)
	if err != nil {
		return err
	}
	sv := usage.Service{ExecutedS: j.ExecutedS, GPUSeconds: j.AttainedService}.Ran(now.Sub(*j.LastStartAt).Seconds(), j.accrual())
	j.ExecutedS, j.AttainedService, j.Accrual = sv.ExecutedS, sv.GPUSeconds, usage.Accrual{}
	j.Queue.CycleService += handover.GPUSeconds
	j.Queue.CycleExecuted += handover.ExecutedS
	j.State = to
	s.stoppedAt[ref] = now
	s.end[id] = code
	s.reason[id] = reason
	if !to.Final() {
		j.Placement = nil
	}
	return nil
}

func (s *memStore) MarkRetry(_ context.Context, ref job.RunRef, code int, reason string, retryAt, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := ref.Job
	j, err := s.current(ref)
	if err != nil {
		return err
	}
	j.ExecutedS += now.Sub(*j.LastStartAt).Seconds()
	j.State, j.Placement, j.ExitCode, j.RetryAt = job.Queued, nil, &code, &retryAt
	j.Failures++
	s.reason[id] = reason
	return nil
}

// FinishedRunTimes says every finished job ran 100 s.
func (s *memStore) FinishedRunTimes(context.Context, int) ([]forecast.Sample, error) {
	return []forecast.Sample{{RunS: 100}, {RunS: 100}, {RunS: 100}}, nil
}

func (s *memStore) RecentSubmissions(context.Context, time.Time, int) ([]Job, error) { return nil, nil }

func (s *memStore) RecordForecasts(_ context.Context, rs []ForecastRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forecasts = append(s.forecasts, rs...)
	return nil
}

func (s *memStore) Cancel(_ context.Context, id int64, _ string, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if !j.State.Waiting() {
		return errConflict
	}
	j.State = job.Cancelled
	return nil
}

func (s *memStore) EndWaiting(_ context.Context, id int64, to job.State, reason string, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if !j.State.Waiting() {
		return errConflict
	}
	j.State, s.reason[id] = to, reason
	return nil
}

// SetReasons keeps why waiting jobs wait, in waits.
func (s *memStore) SetReasons(_ context.Context, reasons map[int64]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waits == nil {
		s.waits = make(map[int64]string)
	}
	for id, r := range reasons {
		s.waits[id] = r
	}
	return nil
}

func (s *memStore) SetQueueStates(_ context.Context, states map[int64]sched.QueueState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, q := range states {
		s.jobs[id].Queue = q
	}
	return nil
}

func (s *memStore) state(id int64) job.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs[id].State
}

// fakeNode records what the engine asks of it.
type fakeNode struct {
	name     string
	gpus     int
	failAll  bool  // Start fails
	startErr error // what a failing Start returns
	// noAccounts are the Unix accounts the machine does not have: their
	// starts are refused (accounts.go).
	noAccounts map[string]bool
	refusals   int

	starts   []job.Spec
	stops    []int64 // the jobs of stopRefs
	stopRefs []job.RunRef
	running  map[int64]int64 // job -> run
}

func newFakeNode(name string, gpus int) *fakeNode {
	return &fakeNode{name: name, gpus: gpus, running: make(map[int64]int64)}
}

func (n *fakeNode) Name() string { return n.name }
func (n *fakeNode) Devices() []gpu.Device {
	d := make([]gpu.Device, n.gpus)
	for i := range d {
		d[i] = gpu.Device{Index: i, MemMiB: 80 << 10}
	}
	return d
}
func (n *fakeNode) Resources() (int, int64) { return 32, 256 << 10 }
func (n *fakeNode) Start(_ context.Context, s job.Spec) error {
	if n.noAccounts[s.Account] {
		n.refusals++
		// As the hub wraps an agent's refusal.
		return fmt.Errorf("start job %d on %s: %w", s.JobID, n.name, &job.AccountError{Account: s.Account, Node: n.name})
	}
	if n.failAll {
		if n.startErr != nil {
			return n.startErr
		}
		return fmt.Errorf("no such program")
	}
	n.starts = append(n.starts, s)
	n.running[s.JobID] = s.Run
	return nil
}
func (n *fakeNode) Stop(_ context.Context, ref job.RunRef) error {
	n.stops = append(n.stops, ref.Job)
	n.stopRefs = append(n.stopRefs, ref)
	return nil
}
func (n *fakeNode) Running() []job.RunRef {
	var refs []job.RunRef
	for id, run := range n.running {
		refs = append(refs, job.RunRef{Job: id, Run: run})
	}
	sort.Slice(refs, func(a, b int) bool { return refs[a].Job < refs[b].Job })
	return refs
}
func (n *fakeNode) Sample(time.Time) []gpu.Sample { return nil }

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// newTestEngine returns an engine whose loop state the test drives by
// calling pass and handleExit directly, on a fake clock.
func newTestEngine(t testing.TB, store *memStore, nodes ...*fakeNode) (*Engine, *fakeClock) {
	t.Helper()
	sc, err := sched.New(sched.Config{Policy: "fifo"})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: t0}
	e, err := New(Config{Store: store, Scheduler: sc, Now: clock.now, LostAfter: 30 * time.Second,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Forecast: ForecastConfig{Sync: true, Forecaster: forecast.Config{Drift: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	e.started = clock.t
	for _, n := range nodes {
		e.nodes[n.name] = n
		for _, ref := range n.Running() {
			e.runs[ref.Job] = &run{id: ref.Run, parts: map[string]bool{n.name: true}}
		}
	}
	return e, clock
}

// testExit hands ex to the engine as an agent would, naming the job's
// current run when ex names none.
func (e *Engine) testExit(ctx context.Context, ex job.Exit) {
	if r := e.runs[ex.JobID]; ex.Run == 0 && r != nil {
		ex.Run = r.id
	}
	e.handleExit(ctx, ex)
}

func mustPass(t *testing.T, e *Engine) {
	t.Helper()
	if err := e.pass(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func exit(node string, id int64, code int, at time.Time) job.Exit {
	return job.Exit{Node: node, JobID: id, ExitCode: code, At: at}
}

func TestStartRecordsThenRuns(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 2, SimDuration: 100, ExecutedS: 40, SubmittedAt: t0})
	n := newFakeNode("n0", 4)
	e, _ := newTestEngine(t, store, n)
	mustPass(t, e)
	if store.state(1) != job.Running {
		t.Fatalf("state = %s, want running", store.state(1))
	}
	if len(n.starts) != 1 || len(n.starts[0].GPUs) != 2 || n.starts[0].SimRemaining != 60*time.Second {
		t.Errorf("starts = %+v; want one start of 2 GPUs with the 60s the job has left", n.starts)
	}
	if got := store.jobs[1].Placement; len(got) != 2 || got[0] != (gpu.Ref{Node: "n0", Index: 0}) {
		t.Errorf("placement = %v", got)
	}
	mustPass(t, e) // a second pass must not start it again
	if len(n.starts) != 1 {
		t.Errorf("job started %d times", len(n.starts))
	}
}

func TestExitDecidesFinalState(t *testing.T) {
	tests := []struct {
		name string
		code int
		want job.State
	}{
		{"exit 0 succeeds", 0, job.Succeeded},
		{"non-zero exit fails", 2, job.Failed},
		{"killed by a signal fails", -1, job.Failed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0})
			n := newFakeNode("n0", 1)
			e, clock := newTestEngine(t, store, n)
			mustPass(t, e)
			e.testExit(context.Background(), exit("n0", 1, tc.code, clock.t.Add(time.Minute)))
			if got := store.state(1); got != tc.want {
				t.Errorf("state = %s, want %s", got, tc.want)
			}
			if c := store.end[1]; c == nil || *c != tc.code {
				t.Errorf("exit code = %v, want %d", c, tc.code)
			}
			if store.jobs[1].ExecutedS != 60 {
				t.Errorf("executed = %v, want 60", store.jobs[1].ExecutedS)
			}
		})
	}
}

func TestPreemptAndCancelEndAsAsked(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0}, Job{ID: 2, GPUs: 1, SubmittedAt: t0.Add(time.Second)})
	n := newFakeNode("n0", 2)
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)

	e.preempt(ctx, sched.Preempt{JobID: 1, Reason: "for a job in a higher queue"}, nil)
	e.preempt(ctx, sched.Preempt{JobID: 1, Reason: "again"}, nil) // already stopping: no second stop
	go func() { _ = e.Cancel(ctx, 2, "cancelled by alice") }()
	(<-e.calls)(ctx)
	if len(n.stops) != 2 || n.stops[0] != 1 || n.stops[1] != 2 {
		t.Fatalf("stops = %v, want [1 2]", n.stops)
	}
	e.testExit(ctx, exit("n0", 1, -1, clock.t))
	e.testExit(ctx, exit("n0", 2, -1, clock.t))
	if store.state(1) != job.Preempted || store.end[1] != nil {
		t.Errorf("job 1: state %s exit %v, want preempted with no exit code", store.state(1), store.end[1])
	}
	if store.state(2) != job.Cancelled {
		t.Errorf("job 2: state %s, want cancelled", store.state(2))
	}
	// The preempted job is resumed by the next pass.
	n.running = map[int64]int64{}
	mustPass(t, e)
	if store.state(1) != job.Running || len(n.starts) != 3 {
		t.Errorf("preempted job not resumed: state %s, %d starts", store.state(1), len(n.starts))
	}
}

func TestCancelWaitingJob(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(Job{ID: 1, GPUs: 8, SubmittedAt: t0})
	e, _ := newTestEngine(t, store, newFakeNode("n0", 2))
	mustPass(t, e)
	errc := make(chan error, 1)
	go func() { errc <- e.Cancel(ctx, 1, "cancelled") }()
	(<-e.calls)(ctx)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if store.state(1) != job.Cancelled {
		t.Errorf("state = %s", store.state(1))
	}
}

func TestMultiNodeJobFailsAsOne(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(Job{ID: 1, GPUs: 4, SubmittedAt: t0})
	a, b := newFakeNode("a", 2), newFakeNode("b", 2)
	e, clock := newTestEngine(t, store, a, b)
	mustPass(t, e)
	if len(a.starts) != 1 || len(b.starts) != 1 {
		t.Fatalf("parts started: a %d, b %d; want one each", len(a.starts), len(b.starts))
	}
	e.testExit(ctx, exit("a", 1, 1, clock.t))
	if len(b.stops) != 1 {
		t.Errorf("failed part did not stop the other: b stops %v", b.stops)
	}
	if store.state(1) != job.Running {
		t.Errorf("job ended before its last part: %s", store.state(1))
	}
	e.testExit(ctx, exit("b", 1, -1, clock.t))
	if store.state(1) != job.Failed || *store.end[1] != 1 {
		t.Errorf("state %s code %v, want failed with code 1", store.state(1), *store.end[1])
	}
}

func TestStartFailureFailsJob(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, Command: []string{"nope"}, SubmittedAt: t0})
	n := newFakeNode("n0", 1)
	n.failAll = true
	e, _ := newTestEngine(t, store, n)
	mustPass(t, e)
	if store.state(1) != job.Failed {
		t.Errorf("state = %s, want failed", store.state(1))
	}
	if len(e.runs) != 0 {
		t.Errorf("engine still tracks a run: %v", e.runs)
	}
}

// TestStartOnDisconnectedMachineRequeues: the job waits again once the
// machine that lost the start's answer has had the time to fence it (it
// may have started), with no exit code: not the job's fault.
func TestStartOnDisconnectedMachineRequeues(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0})
	n := newFakeNode("n0", 1)
	n.failAll, n.startErr = true, fmt.Errorf("start job 1: %w", job.ErrDisconnected)
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)
	if store.state(1) != job.Running {
		t.Errorf("state = %s at once, want running until the machine has fenced it", store.state(1))
	}
	n.failAll = false
	clock.t = clock.t.Add(31 * time.Second)
	mustPass(t, e)
	// Requeued with no exit code, then started again in the same pass.
	if store.jobs[1].Run != 2 || store.end[1] != nil || !strings.Contains(store.reason[1], "disconnected while starting it") {
		t.Errorf("run %d, exit %v (%q); want run 1 requeued with no exit code and run 2 started", store.jobs[1].Run, store.end[1], store.reason[1])
	}
}

func TestLostJobsAreRequeued(t *testing.T) {
	running := func(id int64, node string) Job {
		start := t0.Add(-time.Hour)
		return Job{ID: id, GPUs: 1, State: job.Running, Placement: []gpu.Ref{{Node: node, Index: 0}}, LastStartAt: &start, SubmittedAt: start}
	}
	store := newMemStore(running(1, "back"), running(2, "gone"), running(3, "back"))
	back := newFakeNode("back", 2)
	back.running[3] = 1 // still running there: adopted
	e, clock := newTestEngine(t, store, back)

	e.requeueLost(context.Background(), mustJobs(t, store), clock.t)
	if store.state(1) != job.Queued {
		t.Errorf("job the connected node no longer runs: %s, want queued", store.state(1))
	}
	if store.state(2) != job.Running {
		t.Errorf("job on a missing node requeued before LostAfter: %s", store.state(2))
	}
	if store.state(3) != job.Running {
		t.Errorf("adopted job: %s, want running", store.state(3))
	}
	clock.t = clock.t.Add(31 * time.Second)
	e.requeueLost(context.Background(), mustJobs(t, store), clock.t)
	if store.state(2) != job.Queued {
		t.Errorf("job on a node gone for 31s: %s, want queued", store.state(2))
	}
}

// TestLostRunEndsWhenItsMachineWasLost: the run of a machine this engine
// saw go ends, in the store, when the machine was lost, not when the
// engine gave up waiting for it (LostAfter later, or more where the store
// could not be written meanwhile), nor when the machine came back
// without it: its time and service count up to the loss, and so does the
// work a resume redoes.
func TestLostRunEndsWhenItsMachineWasLost(t *testing.T) {
	start := t0.Add(-time.Hour)
	running := func(id int64, node string) Job {
		return Job{ID: id, GPUs: 1, State: job.Running, Placement: []gpu.Ref{{Node: node, Index: 0}}, LastStartAt: &start, SubmittedAt: start}
	}
	store := newMemStore(running(1, "gone"), running(2, "back"))
	e, clock := newTestEngine(t, store, newFakeNode("gone", 1), newFakeNode("back", 1))
	e.runs[1] = &run{id: 0, parts: map[string]bool{"gone": true}}
	e.runs[2] = &run{id: 0, parts: map[string]bool{"back": true}}
	removeNode(t, e, "gone")
	removeNode(t, e, "back")
	lost := clock.t
	clock.t = clock.t.Add(20 * time.Second)
	addNode(t, e, newFakeNode("back", 1))    // its agent restarted without the run
	clock.t = clock.t.Add(100 * time.Second) // say, the database was out
	e.requeueLost(context.Background(), mustJobs(t, store), clock.t)
	for id, reason := range map[int64]string{1: "node gone lost, not back after 2m0s", 2: "back no longer runs it"} {
		if store.state(id) != job.Queued {
			t.Fatalf("job %d: %s, want queued", id, store.state(id))
		}
		if got, want := store.jobs[id].ExecutedS, lost.Sub(start).Seconds(); got != want {
			t.Errorf("job %d's lost run counted %.0f s, want %.0f (up to the loss, not the requeue)", id, got, want)
		}
		if r := store.reason[id]; !strings.Contains(r, reason) {
			t.Errorf("job %d's reason %q; want it to say %q", id, r, reason)
		}
	}
}

func mustJobs(t *testing.T, s *memStore) []Job {
	js, err := s.UnfinishedEngineJobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestRunLoopEndToEnd(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SimDuration: 0.05, SubmittedAt: t0})
	sc, _ := sched.New(sched.Config{Policy: "fifo"})
	e, err := New(Config{Store: store, Scheduler: sc, Interval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	a, err := agent.New(agent.Config{Name: "n0", Backend: gpu.NewSim("n0", 1, 1024), WorkDir: t.TempDir()}, e.Exits())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.AddNode(ctx, a); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for store.state(1) != job.Succeeded {
		select {
		case <-deadline:
			t.Fatalf("job did not succeed: %s", store.state(1))
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestReconnectStopsRunsNoLongerWanted(t *testing.T) {
	ctx := context.Background()
	start := t0.Add(-time.Minute)
	store := newMemStore(
		Job{ID: 1, GPUs: 1, State: job.Running, Placement: []gpu.Ref{{Node: "n0", Index: 0}}, LastStartAt: &start, SubmittedAt: start},
		Job{ID: 2, GPUs: 1, State: job.Cancelled, SubmittedAt: start},
	)
	n := newFakeNode("n0", 2)
	n.running[1], n.running[2] = 1, 1 // it reports both
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)
	if len(n.stops) != 1 || n.stops[0] != 2 {
		t.Fatalf("stops = %v, want only the cancelled job 2", n.stops)
	}
	e.testExit(ctx, exit("n0", 2, -1, clock.t))
	if store.state(2) != job.Cancelled || store.state(1) != job.Running {
		t.Errorf("states after reconcile: 1 %s, 2 %s", store.state(1), store.state(2))
	}
	// The node goes away: job 1 is requeued once LostAfter passes.
	go func() { _ = e.RemoveNode(ctx, "n0") }()
	(<-e.calls)(ctx)
	clock.t = clock.t.Add(10 * time.Second)
	mustPass(t, e)
	if store.state(1) != job.Running {
		t.Errorf("requeued before LostAfter")
	}
	clock.t = clock.t.Add(30 * time.Second)
	mustPass(t, e)
	if store.state(1) != job.Queued {
		t.Errorf("job of a lost node: %s, want queued", store.state(1))
	}
	if got := e.Stats().RequeuedBy[RequeueNodeLost]; got != 1 {
		t.Errorf("requeues for a lost node: %d, want 1", got)
	}
}

func TestTiresiasPreemptsDemotedJob(t *testing.T) {
	ctx := context.Background()
	start := t0.Add(-time.Minute)
	// Job 1 has run 60s on 1 GPU: past the 30 GPU-second threshold.
	store := newMemStore(
		Job{ID: 1, GPUs: 1, State: job.Running, Placement: []gpu.Ref{{Node: "n0", Index: 0}}, LastStartAt: &start, SubmittedAt: start},
		Job{ID: 2, GPUs: 1, SubmittedAt: t0},
	)
	n := newFakeNode("n0", 1)
	n.running[1] = 1
	e, clock := newTestEngine(t, store, n)
	sc, err := sched.New(sched.Config{Policy: "tiresias-l", Thresholds: []float64{30}})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	mustPass(t, e)
	if store.jobs[1].Queue.Index != 1 {
		t.Errorf("job 1 queue = %d, want demoted to 1 (recorded in the store)", store.jobs[1].Queue.Index)
	}
	if len(n.stops) != 1 || n.stops[0] != 1 {
		t.Fatalf("stops = %v, want job 1 preempted for the new job", n.stops)
	}
	delete(n.running, 1)
	e.testExit(ctx, exit("n0", 1, -1, clock.t))
	if store.state(1) != job.Preempted {
		t.Fatalf("job 1 = %s, want preempted", store.state(1))
	}
	mustPass(t, e)
	if store.state(2) != job.Running || store.state(1) != job.Preempted {
		t.Errorf("after the preemption: job 1 %s, job 2 %s; want job 2 running", store.state(1), store.state(2))
	}
}

func TestDrainedNodeGetsNoNewJobs(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0}, Job{ID: 2, GPUs: 1, SubmittedAt: t0})
	a, b := newFakeNode("a", 1), newFakeNode("b", 1)
	e, _ := newTestEngine(t, store, a, b)
	if err := e.SetDraining("a", true); err != nil {
		t.Fatal(err)
	}
	if err := e.SetDraining("zzz", true); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("draining an unknown node: %v", err)
	}
	mustPass(t, e)
	if len(a.starts) != 0 || len(b.starts) != 1 {
		t.Errorf("starts: drained a %d, b %d; want 0 and 1", len(a.starts), len(b.starts))
	}
	st := e.NodeStatuses()
	if len(st) != 2 || !st[0].Draining || st[1].Draining || len(st[1].Jobs) != 1 {
		t.Errorf("statuses = %+v", st)
	}
	if err := e.SetDraining("a", false); err != nil {
		t.Fatal(err)
	}
	mustPass(t, e)
	if len(a.starts) != 1 {
		t.Errorf("resumed node got %d starts, want 1", len(a.starts))
	}
}

func TestRetryPolicy(t *testing.T) {
	tests := []struct {
		name       string
		maxRetries int
		retries    int  // what the job asked for
		failures   int  // earlier failed runs
		lastCode   *int // their last exit code
		ran        time.Duration
		code       int
		want       job.State
		wantReason string
	}{
		{"no retries configured", 0, 3, 0, nil, time.Minute, 1, job.Failed, "exit code 1"},
		{"a job's own failure is final unless it asks for retries", 3, 0, 0, nil, time.Minute, 1, job.Failed, "exit code 1"},
		{"first failure is retried", 3, 3, 0, nil, 5 * time.Second, 1, job.Queued, "retry 1 of 3"},
		{"the server bounds what a job asks", 2, 5, 0, nil, 5 * time.Second, 1, job.Queued, "retry 1 of 2"},
		{"a different failure is retried", 3, 3, 1, ptr(2), 5 * time.Second, 1, job.Queued, "retry 2 of 3"},
		{"the same quick failure is the job's fault", 3, 3, 1, ptr(1), 5 * time.Second, 1, job.Failed, "not retried"},
		{"the same failure after a long run is retried", 3, 3, 1, ptr(1), 2 * time.Hour, 1, job.Queued, "retry 2 of 3"},
		{"the limit ends retries", 3, 3, 3, ptr(2), time.Hour, 1, job.Failed, "gave up after 3 retries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0, Failures: tc.failures, ExitCode: tc.lastCode, Retries: tc.retries})
			n := newFakeNode("n0", 1)
			e, clock := newTestEngine(t, store, n)
			e.cfg.MaxRetries = tc.maxRetries
			mustPass(t, e)
			e.testExit(context.Background(), exit("n0", 1, tc.code, clock.t.Add(tc.ran)))
			if got := store.state(1); got != tc.want || !strings.Contains(store.reason[1], tc.wantReason) {
				t.Errorf("state %s reason %q; want %s with %q", got, store.reason[1], tc.want, tc.wantReason)
			}
		})
	}
}

func TestRetryWaitsOutItsBackoff(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0, Retries: 3})
	n := newFakeNode("n0", 1)
	e, clock := newTestEngine(t, store, n)
	e.cfg.MaxRetries = 3
	mustPass(t, e)
	delete(n.running, 1)
	e.testExit(context.Background(), exit("n0", 1, 1, clock.t))
	clock.t = clock.t.Add(29 * time.Second)
	mustPass(t, e)
	if store.state(1) != job.Queued || len(n.starts) != 1 {
		t.Fatalf("restarted before the 30s backoff: %s, %d starts", store.state(1), len(n.starts))
	}
	clock.t = clock.t.Add(2 * time.Second)
	mustPass(t, e)
	if store.state(1) != job.Running || len(n.starts) != 2 {
		t.Errorf("not restarted after the backoff: %s, %d starts", store.state(1), len(n.starts))
	}
}

func ptr[T any](v T) *T { return &v }

// jobBehindRunning is an engine whose job 1 has run 90 s on both GPUs of
// n0 and whose job 2, submitted at t0, waits for them.
func jobBehindRunning(t *testing.T) (*Engine, *memStore, *fakeNode) {
	t.Helper()
	start := t0.Add(-90 * time.Second)
	store := newMemStore(
		Job{ID: 1, GPUs: 2, State: job.Running, Placement: []gpu.Ref{{Node: "n0", Index: 0}, {Node: "n0", Index: 1}}, LastStartAt: &start, SubmittedAt: start},
		Job{ID: 2, GPUs: 2, SubmittedAt: t0},
	)
	n := newFakeNode("n0", 2)
	n.running[1] = 1
	e, _ := newTestEngine(t, store, n)
	return e, store, n
}

func TestForecastStarts(t *testing.T) {
	e, store, _ := jobBehindRunning(t)
	mustPass(t, e)
	// Every finished job ran 100s; job 1 has run 90s: job 2 starts in 10s.
	want := t0.Add(10 * time.Second)
	got, ok := e.Forecast(2)
	if !ok || got.State != forecast.StateExpected || !got.Earliest.Equal(want) || !got.Likely.Equal(want) || !got.Latest.Equal(want) || !got.MadeAt.Equal(t0) {
		t.Errorf("forecast = %+v, %v; want a start at %v", got, ok, want)
	}
	if len(store.forecasts) != 1 || store.forecasts[0].Kind != "first" || store.forecasts[0].JobID != 2 || !store.forecasts[0].Likely.Equal(want) {
		t.Errorf("recorded %+v; want job 2's first forecast", store.forecasts)
	}
	if _, ok := e.Forecast(1); ok {
		t.Error("a running job has a start forecast")
	}
	if info := e.ForecastInfo(); info.Jobs != 1 || info.Made != 1 || info.Samples != 10 {
		t.Errorf("forecast info %+v", info)
	}
}

// A forecast is recorded once per job and kind: the first, then one at
// each checkpoint of the job's age.
func TestForecastCheckpoints(t *testing.T) {
	start := t0.Add(-90 * time.Second)
	store := newMemStore(
		Job{ID: 1, GPUs: 2, State: job.Running, Placement: []gpu.Ref{{Node: "n0", Index: 0}, {Node: "n0", Index: 1}}, LastStartAt: &start, SubmittedAt: start, SimDuration: 1e6},
		Job{ID: 2, GPUs: 2, SubmittedAt: t0},
	)
	n := newFakeNode("n0", 2)
	n.running[1] = 1
	e, clock := newTestEngine(t, store, n)
	for range 70 {
		mustPass(t, e)
		clock.t = clock.t.Add(5 * time.Second)
	}
	var kinds []string
	for _, r := range store.forecasts {
		kinds = append(kinds, r.Kind)
	}
	if got := strings.Join(kinds, ","); got != "first,1m,5m" {
		t.Errorf("recorded kinds %s, want first,1m,5m", got)
	}
}

// teamStore adds teams to memStore.
type teamStore struct {
	*memStore
	teams   []Team
	usage   map[string]float64
	samples []TeamSample
}

func (s *teamStore) EngineTeams(context.Context) ([]Team, error) { return s.teams, nil }
func (s *teamStore) SetTeamUsage(_ context.Context, u map[string]float64, _ time.Time) error {
	s.usage = u
	return nil
}
func (s *teamStore) RecordTeamSamples(_ context.Context, ss []TeamSample) error {
	s.samples = append(s.samples, ss...)
	return nil
}

func TestTeamUnderGuaranteeReclaims(t *testing.T) {
	start := t0.Add(-time.Hour)
	running := func(id int64, idx int) Job {
		return Job{ID: id, Team: "nlp", GPUs: 1, State: job.Running, Placement: []gpu.Ref{{Node: "n0", Index: idx}}, LastStartAt: &start, SubmittedAt: start}
	}
	mem := newMemStore(running(1, 0), running(2, 1), Job{ID: 3, Team: "vision", GPUs: 1, SubmittedAt: t0})
	store := &teamStore{memStore: mem, teams: []Team{{Name: "vision", GuaranteeGPUs: 1}, {Name: "nlp", GuaranteeGPUs: 1}}}
	n := newFakeNode("n0", 2)
	n.running[1], n.running[2] = 1, 1
	e, clock := newTestEngine(t, mem, n)
	e.cfg.Store = store
	sc, err := sched.New(sched.Config{Policy: "tiresias-l"})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.Scheduler = sc
	mustPass(t, e)
	if len(n.stops) != 1 {
		t.Fatalf("stops = %v; want one of nlp's jobs reclaimed for vision", n.stops)
	}
	victim := n.stops[0]
	if !strings.Contains(fmt.Sprint(e.FairShare()), "vision") {
		t.Errorf("fair share = %+v", e.FairShare())
	}
	delete(n.running, victim)
	e.testExit(context.Background(), exit("n0", victim, -1, clock.t))
	clock.t = clock.t.Add(time.Minute)
	mustPass(t, e)
	if mem.state(3) != job.Running {
		t.Errorf("vision's job = %s, want running on the reclaimed GPU", mem.state(3))
	}
	if store.usage["nlp"] <= 0 || len(store.samples) == 0 {
		t.Errorf("usage %v, %d samples; want nlp's usage counted and the teams sampled", store.usage, len(store.samples))
	}
}

func TestMachineFailureRequeuesWithoutRetry(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0})
	n := newFakeNode("n0", 1)
	e, clock := newTestEngine(t, store, n)
	mustPass(t, e)
	ex := exit("n0", 1, -1, clock.t)
	ex.Err, ex.Infra = "node failure in Slurm", true
	e.testExit(context.Background(), ex)
	if store.state(1) != job.Queued || store.jobs[1].Failures != 0 || !strings.Contains(store.reason[1], "node failure") {
		t.Errorf("state %s, failures %d, reason %q; want queued again, not counted", store.state(1), store.jobs[1].Failures, store.reason[1])
	}
	if st := e.Stats(); st.RequeuedBy[RequeueAgentError] != 1 || st.Retries != 0 {
		t.Errorf("requeues %v, retries %d; want one for the agent's error, no retry", st.RequeuedBy, st.Retries)
	}
}

// noHistory is a store where no job has finished yet.
type noHistory struct{ *memStore }

func (noHistory) FinishedRunTimes(context.Context, int) ([]forecast.Sample, error) { return nil, nil }

// Before any job has finished, forecasts say so, and that is the first
// forecast recorded: the track record is of the first forecast shown, an
// unknown one included, never of a later, better one.
func TestForecastUnknownIsRecordedFirst(t *testing.T) {
	start := t0.Add(-90 * time.Second)
	store := newMemStore(
		Job{ID: 1, GPUs: 2, State: job.Running, Placement: []gpu.Ref{{Node: "n0", Index: 0}, {Node: "n0", Index: 1}}, LastStartAt: &start, SubmittedAt: start},
		Job{ID: 2, GPUs: 2, SubmittedAt: t0},
	)
	n := newFakeNode("n0", 2)
	n.running[1] = 1
	e, _ := newTestEngine(t, store, n)
	e.cfg.Store = noHistory{store}
	mustPass(t, e)
	if got, ok := e.Forecast(2); !ok || got.State != forecast.StateUnknown || !strings.Contains(got.Reason, "0 of the 3 finished jobs") {
		t.Errorf("forecast %+v, %v; want unknown, saying why", got, ok)
	}
	if len(store.forecasts) != 1 || store.forecasts[0].Kind != "first" || store.forecasts[0].State != forecast.StateUnknown {
		t.Fatalf("recorded %+v; want the unknown forecast as the first", store.forecasts)
	}
	// Run times become known: the next forecast claims a range, and is
	// not recorded as a first again.
	e.cfg.Store = store
	e.fc.lastAt, e.fc.hist = time.Time{}, nil // due now, run times reread
	mustPass(t, e)
	if got, _ := e.Forecast(2); got.State != forecast.StateExpected {
		t.Errorf("forecast %+v; want a range once run times are known", got)
	}
	for _, r := range store.forecasts[1:] {
		if r.Kind == "first" {
			t.Errorf("recorded a second first forecast: %+v", store.forecasts)
		}
	}
}
