package slurm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// fakeSlurm is an in-memory Slurm: jobs are submitted, released and
// cancelled; tests move them through their states.
type fakeSlurm struct {
	mu         sync.Mutex
	nodes      []Node
	jobs       []*Job
	next       int64
	subs       []Submission
	calls      []string
	submitErr  error
	releaseErr error
	readErr    error
}

func newFakeSlurm(nodes ...Node) *fakeSlurm { return &fakeSlurm{nodes: nodes, next: 100} }

func (f *fakeSlurm) job(id int64) *Job {
	for _, j := range f.jobs {
		if j.ID == id {
			return j
		}
	}
	return nil
}

func (f *fakeSlurm) Submit(_ context.Context, s Submission) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "submit "+s.Node)
	if f.submitErr != nil {
		return 0, f.submitErr
	}
	f.subs = append(f.subs, s)
	f.next++
	j := &Job{ID: f.next, Name: s.Name, Comment: s.Comment, State: "PENDING", Reason: "None",
		RequiredNodes: s.Node, CPUs: s.CPUs, MemMiB: s.MemMiB}
	if s.Held {
		j.Reason = "JobHeldUser"
	}
	f.jobs = append(f.jobs, j)
	return j.ID, nil
}

func (f *fakeSlurm) Release(_ context.Context, id int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprint("release ", id))
	if f.releaseErr != nil {
		return f.releaseErr
	}
	if j := f.job(id); j != nil && j.Held() {
		j.Reason = "None"
	}
	return nil
}

func (f *fakeSlurm) Signal(_ context.Context, id int64, sig string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprint("signal ", id, " ", sig))
	if j := f.job(id); j == nil || j.State != "RUNNING" {
		return errors.New("Job can not be altered now")
	}
	return nil
}

func (f *fakeSlurm) Cancel(_ context.Context, id int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprint("cancel ", id))
	if j := f.job(id); j != nil && j.State == "PENDING" {
		j.State, j.WaitStatus = "CANCELLED", 0
	}
	return nil
}

func (f *fakeSlurm) Jobs(context.Context) ([]Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return nil, f.readErr
	}
	out := make([]Job, len(f.jobs))
	for i, j := range f.jobs {
		out[i] = *j
	}
	return out, nil
}

func (f *fakeSlurm) Nodes(context.Context) ([]Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return nil, f.readErr
	}
	return slices.Clone(f.nodes), nil
}

// set moves Slurm job id to state with wait status ws.
func (f *fakeSlurm) set(id int64, state string, ws int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.job(id)
	j.State, j.WaitStatus = state, ws
	if state == "RUNNING" {
		j.Nodes = j.RequiredNodes
		j.GPUs = commentGPUs(j.Comment)
	}
}

func (f *fakeSlurm) setNode(name, state string, flags ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.nodes {
		if f.nodes[i].Name == name {
			f.nodes[i].State, f.nodes[i].Flags = state, flags
		}
	}
}

func (f *fakeSlurm) removeJob(id int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs = slices.DeleteFunc(f.jobs, func(j *Job) bool { return j.ID == id })
}

func (f *fakeSlurm) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeSlurm) lastSub() Submission {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.subs[len(f.subs)-1]
}

// fakeEngine is the engine as the executor sees it.
type fakeEngine struct {
	mu       sync.Mutex
	nodes    map[string]engine.Node
	draining map[string]bool
	events   []string
	exits    chan job.Exit
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{nodes: make(map[string]engine.Node), draining: make(map[string]bool), exits: make(chan job.Exit, 100)}
}

func (e *fakeEngine) AddNode(_ context.Context, n engine.Node) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.nodes[n.Name()] = n
	e.events = append(e.events, fmt.Sprintf("add %s running %v", n.Name(), n.Running()))
	return nil
}

func (e *fakeEngine) RemoveNode(_ context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.nodes, name)
	e.events = append(e.events, "remove "+name)
	return nil
}

func (e *fakeEngine) MirrorDraining(name string, on bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.nodes[name] == nil {
		return engine.ErrUnknownNode
	}
	e.draining[name] = on
	e.events = append(e.events, fmt.Sprintf("drain %s %v", name, on))
	return nil
}

func (e *fakeEngine) NodeStatuses() []engine.NodeStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []engine.NodeStatus
	for name := range e.nodes {
		out = append(out, engine.NodeStatus{Name: name, Draining: e.draining[name]})
	}
	return out
}

func (e *fakeEngine) Exits() chan<- job.Exit { return e.exits }

func (e *fakeEngine) node(t *testing.T, name string) engine.Node {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	n := e.nodes[name]
	if n == nil {
		t.Fatalf("node %s not in the engine; events %q", name, e.events)
	}
	return n
}

func (e *fakeEngine) eventLog() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.events)
}

// exit returns the next exit, failing if none came.
func (e *fakeEngine) exit(t *testing.T) job.Exit {
	t.Helper()
	select {
	case ex := <-e.exits:
		return ex
	default:
		t.Fatal("no exit reported")
		return job.Exit{}
	}
}

func (e *fakeEngine) noExit(t *testing.T) {
	t.Helper()
	select {
	case ex := <-e.exits:
		t.Fatalf("unexpected exit %+v", ex)
	default:
	}
}

// clock is a settable time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func gpuNode(name string, gpus int, partitions ...string) Node {
	n := Node{Name: name, State: "IDLE", CPUs: 8, MemMiB: 2048, Partitions: partitions}
	for i := range gpus {
		n.GPUs = append(n.GPUs, GPU{Index: i})
	}
	return n
}

type fixture struct {
	t     *testing.T
	ctx   context.Context
	slurm *fakeSlurm
	eng   *fakeEngine
	clock *clock
	ex    *Executor
}

// newFixture runs an executor over a fake Slurm with nodes, as a server
// that does not run as root would.
func newFixture(t *testing.T, edit func(*Config), nodes ...Node) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), slurm: newFakeSlurm(nodes...), eng: newFakeEngine(),
		clock: &clock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}
	cfg := Config{Client: f.slurm, Registry: f.eng, WorkDir: t.TempDir(), Grace: 20 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		StartTimeout: 30 * time.Second, Now: f.clock.Now, Path: "/usr/bin:/bin"}
	if edit != nil {
		edit(&cfg)
	}
	ex, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ex.euid = 1000
	f.ex = ex
	return f
}

// start starts a command job on node and returns its Slurm job ID.
func (f *fixture) start(node string, jobID int64, gpus ...int) int64 {
	f.t.Helper()
	err := f.eng.node(f.t, node).Start(f.ctx, job.Spec{JobID: jobID, GPUs: gpus, Command: []string{"python", "train.py"}})
	if err != nil {
		f.t.Fatalf("start job %d: %v", jobID, err)
	}
	return f.slurm.next
}

func TestDiscoversNodesOfItsPartition(t *testing.T) {
	a100 := gpuNode("n1", 2, "gpu")
	a100.GPUs[0].Type, a100.GPUs[1].Type = "a100", "a100"
	f := newFixture(t, func(c *Config) {
		c.Partition = "gpu"
		c.GPUMemory = GPUMemory{DefaultMiB: 16 * 1024, ByType: map[string]int64{"a100": 80 * 1024}}
	}, a100, gpuNode("n2", 4, "gpu"), gpuNode("cpu-only", 0, "gpu"), gpuNode("n3", 4, "other"))
	f.ex.Sync(f.ctx)
	if ev := f.eng.eventLog(); !slices.Equal(ev, []string{"add n1 running []", "add n2 running []"}) {
		t.Fatalf("events %q; want n1 and n2 added", ev)
	}
	n1 := f.eng.node(t, "n1")
	want := []gpu.Device{{Index: 0, Model: "a100", MemMiB: 80 * 1024}, {Index: 1, Model: "a100", MemMiB: 80 * 1024}}
	if got := n1.Devices(); !slices.Equal(got, want) {
		t.Errorf("devices %+v, want %+v", got, want)
	}
	if cpus, mem := n1.Resources(); cpus != 8 || mem != 2048 {
		t.Errorf("resources %d CPUs %d MiB", cpus, mem)
	}
	if d := f.eng.node(t, "n2").Devices(); len(d) != 4 || d[3].Model != "gpu" || d[3].MemMiB != 16*1024 {
		t.Errorf("n2 devices %+v", d)
	}
	if s := n1.Sample(f.clock.Now()); len(s) != 2 || s[1].MemMiB != 80*1024 || s[1].MemUsedMiB != 0 || !s[1].At.Equal(f.clock.Now()) {
		t.Errorf("samples %+v", s)
	}
	f.ex.Sync(f.ctx)
	if ev := f.eng.eventLog(); len(ev) != 2 {
		t.Errorf("a second reading changed the engine: %q", ev)
	}
}

func TestStartSubmitsHeldAndPinnedThenReleases(t *testing.T) {
	t.Setenv("GPUPORTAL_AGENT_TOKEN", "secret")
	t.Setenv("DATABASE_URL", "postgres://user:secret@db")
	f := newFixture(t, func(c *Config) { c.Partition = "gpu" }, gpuNode("n1", 4, "gpu"))
	f.ex.Sync(f.ctx)
	id := f.start("n1", 7, 2, 1)

	s := f.slurm.lastSub()
	dir := filepath.Join(f.ex.cfg.WorkDir, "jobs", "7")
	if !s.Held || s.Node != "n1" || s.Partition != "gpu" || s.GPUs != 2 || s.CPUs != 4 || s.MemMiB != 1024 ||
		s.Name != "gpuportal-7" || s.Comment != "gpuportal job 7 run=0 gpus=1,2" || s.Dir != dir ||
		s.Output != filepath.Join(dir, "output.log") || s.User != "" {
		t.Errorf("submission %+v", s)
	}
	if s.Script != f.ex.script || !slices.Equal(s.Args, []string{"python", "train.py"}) {
		t.Errorf("script %s args %q", s.Script, s.Args)
	}
	for _, want := range []string{"GPUPORTAL_JOB_ID=7", "GPUPORTAL_GPUS=1,2", "GPUPORTAL_CHECKPOINT_DIR=" + filepath.Join(dir, "checkpoint"), "PATH=/usr/bin:/bin"} {
		if !slices.Contains(s.Env, want) {
			t.Errorf("environment %q lacks %s", s.Env, want)
		}
	}
	for _, kv := range s.Env {
		if strings.Contains(kv, "secret") {
			t.Errorf("the server's environment reached the job: %s", kv)
		}
	}
	if slices.ContainsFunc(s.Env, func(kv string) bool { return strings.HasPrefix(kv, "GPUPORTAL_RESUME") }) {
		t.Errorf("environment %q resumes a first run from an empty checkpoint folder", s.Env)
	}
	if calls := f.slurm.callLog(); !slices.Equal(calls, []string{"submit n1", fmt.Sprint("release ", id)}) {
		t.Errorf("calls %q; want a held submission then its release", calls)
	}
	if st, err := os.Stat(filepath.Join(dir, "checkpoint")); err != nil || !st.IsDir() {
		t.Errorf("checkpoint folder: %v", err)
	}
	if got := f.eng.node(t, "n1").Running(); !slices.Equal(got, []job.RunRef{{Job: 7}}) {
		t.Errorf("running %v", got)
	}
	lp, ok := f.eng.node(t, "n1").(interface{ LogPath(int64) string })
	if !ok || lp.LogPath(7) != s.Output {
		t.Errorf("LogPath does not name the output file %s", s.Output)
	}
	b, err := os.ReadFile(f.ex.script)
	if err != nil || string(b) != jobScript {
		t.Errorf("batch script: %v", err)
	}
}

func TestStartRefusals(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 2))
	f.ex.Sync(f.ctx)
	n1 := f.eng.node(t, "n1")
	for _, tt := range []struct {
		name string
		spec job.Spec
		want string
	}{
		{"GPU the node lacks", job.Spec{JobID: 1, GPUs: []int{2}, Command: []string{"x"}}, "no GPU 2"},
		{"GPU twice", job.Spec{JobID: 1, GPUs: []int{1, 1}, Command: []string{"x"}}, "twice"},
		{"no GPU", job.Spec{JobID: 1, Command: []string{"x"}}, "no GPUs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := n1.Start(f.ctx, tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, job.ErrDisconnected) {
				t.Errorf("err = %v; want the job's fault, %q", err, tt.want)
			}
		})
	}
	f.ex.euid = 0
	if err := n1.Start(f.ctx, job.Spec{JobID: 2, GPUs: []int{0}, Command: []string{"id"}}); !errors.Is(err, ErrRootJobs) {
		t.Errorf("a server running as root started a command job as root: %v", err)
	}
	if err := n1.Start(f.ctx, job.Spec{JobID: 3, GPUs: []int{0}, SimRemaining: 2500 * time.Millisecond}); err != nil {
		t.Fatalf("simulated job: %v", err)
	}
	if s := f.slurm.lastSub(); !slices.Equal(s.Args, []string{"sleep", "2.500"}) {
		t.Errorf("a simulated job runs %q, want sleep for its remaining time", s.Args)
	}
	if calls := f.slurm.callLog(); len(calls) != 2 {
		t.Errorf("calls %q; want only the simulated job's", calls)
	}
}

func TestSlurmTroubleRequeuesTheJob(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 2))
	f.ex.Sync(f.ctx)
	n1 := f.eng.node(t, "n1")
	f.slurm.submitErr = errors.New("sbatch: error: Batch job submission failed: Unable to contact slurm controller")
	err := n1.Start(f.ctx, job.Spec{JobID: 1, GPUs: []int{0}, Command: []string{"x"}})
	if !errors.Is(err, job.ErrDisconnected) || !strings.Contains(err.Error(), "Unable to contact slurm controller") ||
		strings.Contains(err.Error(), "agent disconnected") {
		t.Errorf("err = %v; want Slurm's message, matching job.ErrDisconnected", err)
	}
	f.slurm.submitErr = nil
	f.slurm.releaseErr = errors.New("scontrol: error: Invalid job id specified")
	err = n1.Start(f.ctx, job.Spec{JobID: 1, GPUs: []int{0}, Command: []string{"x"}})
	if !errors.Is(err, job.ErrDisconnected) {
		t.Errorf("err = %v; want job.ErrDisconnected", err)
	}
	id := f.slurm.next
	if calls := f.slurm.callLog(); calls[len(calls)-1] != fmt.Sprint("cancel ", id) {
		t.Errorf("calls %q; want the unreleased job cancelled", calls)
	}
	if r := n1.Running(); len(r) != 0 {
		t.Errorf("running %v after failed starts", r)
	}
}

func TestExitsFromSlurm(t *testing.T) {
	tests := []struct {
		name  string
		state string
		ws    int
		code  int
		err   string
		as    job.State // EndedAs
	}{
		{"completed", "COMPLETED", 0, 0, "", ""},
		{"exit code 3 is wait status 768", "FAILED", 768, 3, "", ""},
		{"killed by SIGTERM", "FAILED", 15, -1, "killed by signal 15 (terminated)", ""},
		{"an scancel is a cancel", "CANCELLED", 15, -1, "cancelled in Slurm", job.Cancelled},
		{"node failure", "NODE_FAIL", 0, -1, "node failure in Slurm", ""},
		{"time limit", "TIMEOUT", 0, -1, "Slurm's time limit reached", job.TimedOut},
		{"out of memory", "OUT_OF_MEMORY", 0, -1, "out of memory (Slurm)", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, gpuNode("n1", 2))
			f.ex.Sync(f.ctx)
			id := f.start("n1", 5, 0)
			f.slurm.set(id, "RUNNING", 0)
			f.ex.Sync(f.ctx)
			f.eng.noExit(t)
			f.slurm.set(id, tt.state, tt.ws)
			f.ex.Sync(f.ctx)
			ex := f.eng.exit(t)
			if ex.Node != "n1" || ex.JobID != 5 || ex.ExitCode != tt.code || ex.Err != tt.err || ex.At.IsZero() || ex.EndedAs != tt.as {
				t.Errorf("exit %+v; want code %d, err %q, ended as %q", ex, tt.code, tt.err, tt.as)
			}
			if r := f.eng.node(t, "n1").Running(); len(r) != 0 {
				t.Errorf("still running %v", r)
			}
			f.ex.Sync(f.ctx)
			f.eng.noExit(t)
		})
	}
}

func TestStopSignalsThenCancelsAfterTheGrace(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 2))
	f.ex.Sync(f.ctx)
	n1 := f.eng.node(t, "n1")
	id := f.start("n1", 5, 0)
	f.slurm.set(id, "RUNNING", 0)
	f.ex.Sync(f.ctx)
	if err := n1.Stop(f.ctx, job.RunRef{Job: 5}); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint("signal ", id, " TERM")
	if calls := f.slurm.callLog(); calls[len(calls)-1] != want {
		t.Fatalf("calls %q; want %s", calls, want)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(f.slurm.callLog(), fmt.Sprint("cancel ", id)) {
		if time.Now().After(deadline) {
			t.Fatalf("no cancel after the grace period: %q", f.slurm.callLog())
		}
		time.Sleep(5 * time.Millisecond)
	}

	// A run that ends within the grace is not cancelled.
	id = f.start("n1", 6, 1)
	f.slurm.set(id, "RUNNING", 0)
	f.ex.Sync(f.ctx)
	if err := n1.Stop(f.ctx, job.RunRef{Job: 6}); err != nil {
		t.Fatal(err)
	}
	f.slurm.set(id, "COMPLETED", 0)
	f.ex.Sync(f.ctx)
	time.Sleep(60 * time.Millisecond) // about time: past the grace period, when a cancel would come
	if slices.Contains(f.slurm.callLog(), fmt.Sprint("cancel ", id)) {
		t.Errorf("a run that ended in its grace period was cancelled")
	}
	if err := n1.Stop(f.ctx, job.RunRef{Job: 99}); err != nil {
		t.Errorf("stopping a job that does not run: %v", err)
	}
}

func TestStopBeforeSlurmStartsItCancels(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 2))
	f.ex.Sync(f.ctx)
	id := f.start("n1", 5, 0)
	if err := f.eng.node(t, "n1").Stop(f.ctx, job.RunRef{Job: 5}); err != nil {
		t.Fatal(err)
	}
	if calls := f.slurm.callLog(); calls[len(calls)-1] != fmt.Sprint("cancel ", id) {
		t.Fatalf("calls %q; want a cancel", calls)
	}
	f.ex.Sync(f.ctx)
	if ex := f.eng.exit(t); ex.ExitCode != -1 || ex.JobID != 5 {
		t.Errorf("exit %+v", ex)
	}
}

func TestStartTimeout(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 2))
	f.ex.Sync(f.ctx)
	id := f.start("n1", 5, 0)
	f.clock.Add(20 * time.Second)
	f.ex.Sync(f.ctx)
	if slices.Contains(f.slurm.callLog(), fmt.Sprint("cancel ", id)) {
		t.Fatalf("cancelled before the start timeout")
	}
	f.clock.Add(11 * time.Second)
	f.ex.Sync(f.ctx) // cancels
	f.ex.Sync(f.ctx) // sees it cancelled
	ex := f.eng.exit(t)
	if ex.ExitCode != -1 || !strings.HasPrefix(ex.Err, "Slurm did not start it within 30s") {
		t.Errorf("exit %+v; want the start timeout", ex)
	}
}

func TestLostNodeRequeuesThroughTheEngine(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 2), gpuNode("n2", 2))
	f.ex.Sync(f.ctx)
	id := f.start("n1", 5, 0)
	f.slurm.set(id, "RUNNING", 0)
	f.ex.Sync(f.ctx)

	// slurmd stops answering: nothing changes until Slurm gives up.
	f.slurm.setNode("n1", "ALLOCATED", "NOT_RESPONDING")
	f.ex.Sync(f.ctx)
	// Down: the node leaves the engine, which requeues its jobs after its
	// heartbeat timeout unless it returns with them.
	f.slurm.setNode("n1", "DOWN", "NOT_RESPONDING")
	f.ex.Sync(f.ctx)
	f.slurm.setNode("n1", "ALLOCATED")
	f.ex.Sync(f.ctx)
	// Down for good: Slurm fails the job, which nobody is told about,
	// since the engine no longer runs it there.
	f.slurm.setNode("n1", "DOWN", "NOT_RESPONDING")
	f.slurm.set(id, "NODE_FAIL", 0)
	f.ex.Sync(f.ctx)
	f.eng.noExit(t)
	f.slurm.setNode("n1", "IDLE")
	f.ex.Sync(f.ctx)
	want := []string{"add n1 running []", "add n2 running []", "remove n1", "add n1 running [job 5 run 0]", "remove n1", "add n1 running []"}
	if ev := f.eng.eventLog(); !slices.Equal(ev, want) {
		t.Errorf("events\n %q\nwant\n %q", ev, want)
	}
	f.slurm.mu.Lock()
	f.slurm.nodes = f.slurm.nodes[1:]
	f.slurm.mu.Unlock()
	f.ex.Sync(f.ctx)
	if ev := f.eng.eventLog(); ev[len(ev)-1] != "remove n1" {
		t.Errorf("a node gone from sinfo stays: %q", ev)
	}
}

func TestDrainFollowsSlurm(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 2), gpuNode("n2", 2))
	f.ex.Sync(f.ctx)
	f.slurm.setNode("n1", "IDLE", "DRAIN")
	f.ex.Sync(f.ctx)
	f.ex.Sync(f.ctx)
	f.slurm.setNode("n1", "IDLE")
	f.ex.Sync(f.ctx)
	// n2 an admin drained in gpuportal: Slurm's resume leaves it drained.
	if err := f.eng.MirrorDraining("n2", true); err != nil {
		t.Fatal(err)
	}
	f.slurm.setNode("n2", "IDLE", "DRAIN")
	f.ex.Sync(f.ctx)
	f.slurm.setNode("n2", "IDLE")
	f.ex.Sync(f.ctx)
	want := []string{"add n1 running []", "add n2 running []", "drain n1 true", "drain n1 false", "drain n2 true"}
	if ev := f.eng.eventLog(); !slices.Equal(ev, want) {
		t.Errorf("events\n %q\nwant\n %q", ev, want)
	}
}

func TestAdoptsTheRunsOfAnEarlierServer(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 4))
	f.slurm.jobs = []*Job{
		{ID: 40, Name: "gpuportal-7", Comment: "gpuportal job 7 run=3 gpus=0,1", State: "RUNNING", Nodes: "n1", CPUs: 4, MemMiB: 1024},
		{ID: 41, Name: "gpuportal-8", State: "PENDING", Reason: "JobHeldUser", RequiredNodes: "n1"},
		{ID: 42, Name: "gpuportal-9", State: "COMPLETED", Nodes: "n1"},
		{ID: 43, Name: "someone-elses", State: "RUNNING", Nodes: "n1"},
		{ID: 44, Name: "gpuportal-10", State: "PENDING", Reason: "None", RequiredNodes: "n1", Comment: "gpuportal job 10 gpus=3"},
	}
	f.ex.Sync(f.ctx)
	if ev := f.eng.eventLog(); !slices.Equal(ev, []string{"add n1 running [job 7 run 3 job 10 run 0]"}) {
		t.Errorf("events %q; want n1 added running 7 and 10", ev)
	}
	if calls := f.slurm.callLog(); !slices.Equal(calls, []string{"cancel 41"}) {
		t.Errorf("calls %q; want the held job cancelled", calls)
	}
	f.start("n1", 11, 2)
	if s := f.slurm.lastSub(); s.GPUs != 1 || s.CPUs != 2 || s.MemMiB != 512 {
		t.Errorf("submission %+v", s)
	}
	f.slurm.set(40, "COMPLETED", 0)
	f.ex.Sync(f.ctx)
	if ex := f.eng.exit(t); ex.JobID != 7 || ex.ExitCode != 0 {
		t.Errorf("adopted run's exit %+v", ex)
	}
}

func TestSharedGPUIsCountedOnce(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 4))
	f.ex.Sync(f.ctx)
	f.start("n1", 1, 0, 1, 2)
	if s := f.slurm.lastSub(); s.GPUs != 3 || s.CPUs != 6 || s.MemMiB != 1536 {
		t.Errorf("first submission %+v", s)
	}
	// Co-located on GPU 2: Slurm counts it once; CPUs and memory within
	// what is left.
	f.start("n1", 2, 2)
	if s := f.slurm.lastSub(); s.GPUs != 0 || s.CPUs != 2 || s.MemMiB != 512 {
		t.Errorf("co-located submission %+v", s)
	}
	f.start("n1", 3, 3)
	if s := f.slurm.lastSub(); s.GPUs != 1 || s.CPUs != 1 || s.MemMiB != 1 {
		t.Errorf("last submission %+v; want at least one CPU and 1 MiB", s)
	}
}

// The scheduler may start a job on the GPUs of one it preempts in the
// same pass: the new run asks Slurm for its whole share, and waits for the
// old one to end without its start timeout running.
func TestStartOnTheGPUsOfAStoppingRun(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 4))
	f.ex.Sync(f.ctx)
	old := f.start("n1", 1, 0, 1, 2, 3)
	f.slurm.set(old, "RUNNING", 0)
	f.ex.Sync(f.ctx)
	if err := f.eng.node(t, "n1").Stop(f.ctx, job.RunRef{Job: 1}); err != nil {
		t.Fatal(err)
	}
	f.start("n1", 2, 0, 1)
	if s := f.slurm.lastSub(); s.GPUs != 2 || s.CPUs != 4 || s.MemMiB != 1024 {
		t.Errorf("submission %+v; want half the node", s)
	}
	f.clock.Add(time.Minute)
	f.ex.Sync(f.ctx)
	f.slurm.set(old, "COMPLETED", 0)
	f.clock.Add(time.Second)
	f.ex.Sync(f.ctx)
	f.ex.Sync(f.ctx)
	f.eng.exit(t)
	f.eng.noExit(t)
	if calls := f.slurm.callLog(); slices.Contains(calls, fmt.Sprint("cancel ", f.slurm.next)) {
		t.Errorf("the waiting run was cancelled: %q", calls)
	}
}

func TestStartingAgainCancelsTheEarlierRun(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 2))
	f.ex.Sync(f.ctx)
	first := f.start("n1", 5, 0)
	f.slurm.set(first, "RUNNING", 0)
	f.ex.Sync(f.ctx)
	f.start("n1", 5, 1)
	if !slices.Contains(f.slurm.callLog(), fmt.Sprint("cancel ", first)) {
		t.Errorf("earlier run not cancelled: %q", f.slurm.callLog())
	}
	f.slurm.set(first, "CANCELLED", 15)
	f.ex.Sync(f.ctx)
	f.eng.noExit(t)
	if r := f.eng.node(t, "n1").Running(); !slices.Equal(r, []job.RunRef{{Job: 5}}) {
		t.Errorf("running %v", r)
	}
}

func TestJobsSqueueForgot(t *testing.T) {
	comp := filepath.Join(t.TempDir(), "jobcomp.txt")
	f := newFixture(t, func(c *Config) { c.JobCompFile = comp; c.JobCompZone = time.UTC }, gpuNode("n1", 2))
	f.ex.Sync(f.ctx)
	a := f.start("n1", 5, 0)
	b := f.start("n1", 6, 1)
	line := fmt.Sprintf("JobId=%d UserId=u(1) Name=gpuportal-5 JobState=FAILED NodeList=n1 EndTime=2026-01-02T03:04:00 ExitCode=2:0\n", a)
	if err := os.WriteFile(comp, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	// A reading that began before the runs were recorded may miss them.
	f.slurm.removeJob(a)
	f.slurm.removeJob(b)
	jobs, _ := f.slurm.Jobs(f.ctx)
	f.ex.syncJobs(f.ctx, jobs, f.clock.Now().Add(-time.Second))
	f.eng.noExit(t)

	f.clock.Add(time.Second)
	f.ex.Sync(f.ctx)
	got := map[int64]job.Exit{}
	for range 2 {
		ex := f.eng.exit(t)
		got[ex.JobID] = ex
	}
	if ex := got[5]; ex.ExitCode != 2 || !ex.At.Equal(time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)) {
		t.Errorf("exit from the job completion log %+v", ex)
	}
	if ex := got[6]; ex.ExitCode != -1 || !strings.Contains(ex.Err, "Slurm lost track of it") {
		t.Errorf("exit of a vanished job %+v", ex)
	}
}

func TestSlurmUnreachableChangesNothing(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 2))
	f.ex.Sync(f.ctx)
	f.start("n1", 5, 0)
	f.slurm.readErr = errors.New("squeue: error: Unable to contact slurm controller")
	for range 3 {
		f.ex.Sync(f.ctx)
	}
	f.eng.noExit(t)
	if ev := f.eng.eventLog(); len(ev) != 1 {
		t.Errorf("events %q while Slurm was unreachable", ev)
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Poll = 5 * time.Millisecond }, gpuNode("n1", 2))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.ex.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(f.eng.eventLog()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

func TestParseGPUMemory(t *testing.T) {
	tests := []struct {
		in      string
		def     int64
		a100    int64
		invalid bool
	}{
		{"80", 80 * 1024, 80 * 1024, false},
		{"a100=40,16", 16 * 1024, 40 * 1024, false},
		{"a100=40", 80 * 1024, 40 * 1024, false},
		{"", 80 * 1024, 80 * 1024, false},
		{"0", 0, 0, true},
		{"=4", 0, 0, true},
		{"a100=big", 0, 0, true},
	}
	for _, tt := range tests {
		m, err := ParseGPUMemory(tt.in)
		if (err != nil) != tt.invalid {
			t.Errorf("ParseGPUMemory(%q): %v", tt.in, err)
			continue
		}
		if !tt.invalid && (m.For("v100") != tt.def || m.For("a100") != tt.a100) {
			t.Errorf("ParseGPUMemory(%q) = %+v", tt.in, m)
		}
	}
}

// The batch script keeps Slurm's CUDA_VISIBLE_DEVICES where Slurm
// allocated the GPUs gpuportal chose, and sets gpuportal's otherwise.
func TestJobScript(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "job.sh")
	if err := writeScript(path); err != nil {
		t.Fatal(err)
	}
	if err := writeScript(path); err != nil {
		t.Fatal(err)
	}
	show := `echo "cvd=$CUDA_VISIBLE_DEVICES left=${GPUPORTAL_GPUS-unset} args:$#:$1"`
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"Slurm allocated ours (under cgroups, renumbered)", []string{"SLURM_JOB_GPUS=1,2", "GPUPORTAL_GPUS=1,2", "CUDA_VISIBLE_DEVICES=0,1"},
			"cvd=0,1 left=unset args:2:$(x) 'y'\n"},
		{"Slurm allocated others", []string{"SLURM_JOB_GPUS=0,1", "GPUPORTAL_GPUS=2,3", "CUDA_VISIBLE_DEVICES=0,1"},
			"gpuportal: Slurm allocated GPUs 0,1, the scheduler chose 2,3: using 2,3\ncvd=2,3 left=unset args:2:$(x) 'y'\n"},
		{"no gres", []string{"GPUPORTAL_GPUS=3"}, "cvd=3 left=unset args:2:$(x) 'y'\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(sh, path, sh, "-c", show, "job", "$(x) 'y'", "second")
			cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, tt.env...)
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != tt.want {
				t.Errorf("output %q (%v), want %q", out, err, tt.want)
			}
		})
	}
}

// A job's own variables and folder reach sbatch; its variables never
// replace the identity, the Slurm configuration or gpuportal's own.
func TestJobEnvAndWorkdir(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 2))
	s := job.Spec{JobID: 9, Run: 1, Env: []string{"LR=0.1", "PATH=/opt/bin", "USER=mallory", "GPUPORTAL_RUN=7", "SLURM_CONF=/x"},
		Array: &job.ArrayTask{ID: 8, Index: 1}}
	env := f.ex.jobEnv(s, []int{0}, nil, nil)
	for _, want := range []string{"LR=0.1", "PATH=/opt/bin", "GPUPORTAL_RUN=1", "GPUPORTAL_ARRAY_JOB_ID=8", "GPUPORTAL_ARRAY_INDEX=1"} {
		if !slices.Contains(env, want) {
			t.Errorf("environment %q lacks %s", env, want)
		}
	}
	for _, not := range []string{"USER=mallory", "GPUPORTAL_RUN=7", "SLURM_CONF=/x", "PATH=" + f.ex.cfg.Path} {
		if slices.Contains(env, not) {
			t.Errorf("environment %q has %s", env, not)
		}
	}
	for dir, want := range map[string]string{"": f.ex.jobDir(9), "/data/x/": "/data/x", "sub": filepath.Join(f.ex.jobDir(9), "sub")} {
		if got := f.ex.workdir(job.Spec{JobID: 9, Dir: dir}); got != want {
			t.Errorf("workdir(%q) = %q, want %q", dir, got, want)
		}
	}
}

// TestStartAsOwners: under --slurm-run-as owner, a job runs as its
// owner's account with its primary group (sbatch --uid and --gid), and an
// owner without an account, root or a system account is refused as the
// job's account, which the engine waits the job for.
func TestStartAsOwners(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.WorkDir = passableDir(t) }, gpuNode("n1", 2))
	f.ex.Sync(f.ctx)
	f.ex.cfg.RunAs, f.ex.euid = agent.RunAsOwner, 0
	n1 := f.eng.node(t, "n1")
	cmd := []string{"id"}
	for _, tt := range []struct {
		name    string
		account string
		want    string
		refusal bool
	}{
		{"no account", "gpt-no-such-account", "gpt-no-such-account has no Unix account on n1", true},
		{"root", "root", "root's Unix account on n1 may not run jobs: it is root", true},
		{"a system account", "daemon", "below --slurm-min-uid 1000", true},
		{"a server that does not say", "", "has no owner's account", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := n1.Start(f.ctx, job.Spec{JobID: 1, GPUs: []int{0}, Command: cmd, Account: tt.account})
			if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, job.ErrNoAccount) != tt.refusal {
				t.Errorf("err = %v; want %q, refusal %v", err, tt.want, tt.refusal)
			}
		})
	}
	if calls := f.slurm.callLog(); len(calls) != 0 {
		t.Errorf("calls %q; want none for refused jobs", calls)
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("giving a job folder to nobody needs root, which CI runs as")
		}
		t.Skip("giving a job folder to nobody needs root")
	}
	nobody, err := agent.LookupUser("nobody")
	if err != nil {
		t.Fatal(err)
	}
	if err := n1.Start(f.ctx, job.Spec{JobID: 2, GPUs: []int{0}, Command: cmd, Account: "nobody"}); err != nil {
		t.Fatal(err)
	}
	s := f.slurm.lastSub()
	if s.User != "nobody" || s.Group != strconv.Itoa(nobody.GID) || !slices.Contains(s.Env, "USER=nobody") {
		t.Errorf("submitted as %q group %q with env %q; want nobody, group %d", s.User, s.Group, s.Env, nobody.GID)
	}
	fi, err := os.Stat(f.ex.jobDir(2))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != nobody.UID || fi.Mode().Perm() != 0o700 {
		t.Errorf("job folder belongs to %d, mode %v; want nobody's, 0700", st.Uid, fi.Mode().Perm())
	}
}

// passableDir is a temporary folder that every account may pass through,
// as may its parents, as a work folder shared with the jobs' accounts is.
func passableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestWorkFolderLetsJobsAccountsPass: when jobs run as another account
// than the server's, the work folder and its jobs folder are passable
// only (0711), as an agent's; a folder above that the account cannot pass
// through is refused at start, naming it, and so is, per job, one that
// shuts out a job's owner, instead of every job failing in Slurm (issue
// 31: slurmstepd could not open output.log).
func TestWorkFolderLetsJobsAccountsPass(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("running jobs as nobody needs root, which CI runs as")
		}
		t.Skip("running jobs as nobody needs root")
	}
	newEx := func(workDir, runAs string) (*Executor, error) {
		return New(Config{Client: newFakeSlurm(), Registry: newFakeEngine(), WorkDir: workDir, RunAs: runAs,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	}
	for _, runAs := range []string{"nobody", agent.RunAsOwner} {
		t.Run(runAs, func(t *testing.T) {
			shut := passableDir(t)
			if err := os.Chmod(shut, 0o750); err != nil {
				t.Fatal(err)
			}
			_, err := newEx(filepath.Join(shut, "work"), runAs)
			want := fmt.Sprintf("cannot pass through %s (mode 0750)", shut)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--slurm-work-dir") {
				t.Errorf("New in a folder others cannot pass: %v; want %q", err, want)
			}

			work := filepath.Join(passableDir(t), "work")
			ex, err := newEx(work, runAs)
			if err != nil {
				t.Fatal(err)
			}
			for _, dir := range []string{work, filepath.Join(work, "jobs")} {
				if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o711 {
					t.Errorf("%s: %v, %v; want mode 0711", dir, fi.Mode().Perm(), err)
				}
			}
			if runAs != agent.RunAsOwner {
				return
			}
			// Shut after the start: the owner's job is refused, not sent
			// to fail in Slurm.
			if err := os.Chmod(work, 0o700); err != nil {
				t.Fatal(err)
			}
			_, err = ex.jobRunAs("n1", job.Spec{JobID: 7, Command: []string{"id"}, Account: "nobody"})
			if want := fmt.Sprintf("nobody cannot pass through %s (mode 0700)", work); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("job of an owner shut out: %v; want %q", err, want)
			}
		})
	}
	// Jobs that run as the server's own user leave the folder as it was.
	work := filepath.Join(t.TempDir(), "work")
	if _, err := newEx(work, ""); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(work, "jobs")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("jobs folder for the server's own jobs: %v, %v; want 0755 as before", fi.Mode().Perm(), err)
	}
}

// TestStartResumesFromTheCheckpoint: a run whose checkpoint folder (on the
// shared work folder) holds what an earlier run saved is told to resume,
// and from which run, as on agents; its node reports what it resumed from
// for the job's page (engine.ResumeReporter).
func TestStartResumesFromTheCheckpoint(t *testing.T) {
	f := newFixture(t, nil, gpuNode("n1", 4, "gpu"))
	f.ex.Sync(f.ctx)
	n := f.eng.node(t, "n1")
	startRun := func(run int64) Submission {
		t.Helper()
		if err := n.Start(f.ctx, job.Spec{JobID: 7, Run: run, GPUs: []int{2}, Command: []string{"python", "train.py"}}); err != nil {
			t.Fatalf("start run %d: %v", run, err)
		}
		return f.slurm.lastSub()
	}
	if s := startRun(1); slices.ContainsFunc(s.Env, func(kv string) bool { return strings.HasPrefix(kv, "GPUPORTAL_RESUME") }) {
		t.Errorf("first run's environment %q; want no GPUPORTAL_RESUME", s.Env)
	}
	ckpt := filepath.Join(f.ex.cfg.WorkDir, "jobs", "7", "checkpoint")
	if err := os.WriteFile(filepath.Join(ckpt, "step"), []byte("41"), 0o600); err != nil {
		t.Fatal(err)
	}
	at := f.clock.Now().Add(time.Minute) // run 1 wrote it a minute in
	if err := os.Chtimes(filepath.Join(ckpt, "step"), at, at); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(2 * time.Minute)
	s := startRun(2)
	for _, want := range []string{"GPUPORTAL_RESUME=1", "GPUPORTAL_RESUME_RUN=1", "GPUPORTAL_CHECKPOINT_AT=" + at.Format(time.RFC3339Nano)} {
		if !slices.Contains(s.Env, want) {
			t.Errorf("second run's environment %q lacks %s", s.Env, want)
		}
	}
	got, ok := n.(engine.ResumeReporter).Resumes()[7]
	if want := (job.Resume{Run: 2, FromRun: 1, CheckpointAt: at}); !ok || got.Run != want.Run || got.FromRun != want.FromRun || !got.CheckpointAt.Equal(at) {
		t.Errorf("Resumes()[7] = %+v, %v; want %+v", got, ok, want)
	}
}
