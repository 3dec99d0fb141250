package enginestore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestIncrementalPassDecidesAsAWholeRead runs two engines side by side
// over two databases given the same randomized sequence of changes
// (submissions, ends that succeed or fail, cancels, cancels asked from
// another replica, holds and releases, the clock moving on), one reading
// the jobs through the view that keeps them ordered between passes and
// merges the rows changed (view.go), the other reading them whole every
// pass. After every step both must have decided the same: every job's
// state, run, placement and queue state in the store, and every wait
// reason and position the engine publishes. Fair share between users,
// reservations and preemption are on, so that the core's orders are
// exercised too.
func TestIncrementalPassDecidesAsAWholeRead(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	incr := newSideEngine(t, true, now)
	whole := newSideEngine(t, false, now)
	sides := []*sideEngine{incr, whole}
	rng := rand.New(rand.NewPCG(33, 1))
	users := []string{"alice", "bob", "carol", "dave"}
	step := func(what string, change func(s *sideEngine) error) {
		t.Helper()
		for _, s := range sides {
			if err := change(s); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
	}
	for i := range 120 {
		// The clock moves on, and both take it before the change: the
		// usage the teams' users accrue over the time that passed
		// follows the jobs running in the first pass that sees it.
		clock.Add(int64(time.Duration(1+rng.IntN(40)) * time.Second))
		for _, s := range sides {
			s.settle(t)
		}
		var what string
		switch k := rng.IntN(10); {
		case k < 4:
			n := 1 + rng.IntN(4)
			what = fmt.Sprintf("step %d: %d submitted", i, n)
			specs := make([]models.Job, n)
			for j := range specs {
				specs[j] = models.Job{Name: "j", Team: []string{"vision", "nlp"}[rng.IntN(2)], User: users[rng.IntN(len(users))],
					GPUs: []int{1, 1, 2, 4}[rng.IntN(4)], SimDuration: float64(60 + rng.IntN(3600)), SubmittedAt: now()}
			}
			step(what, func(s *sideEngine) error {
				js := make([]*models.Job, n)
				for j := range specs {
					js[j] = new(models.Job)
					*js[j] = specs[j]
				}
				return s.ms.CreateJobs(context.Background(), js)
			})
		case k < 7:
			refs := incr.running()
			if len(refs) == 0 {
				continue
			}
			ref := refs[rng.IntN(len(refs))]
			code := []int{0, 0, 1}[rng.IntN(3)]
			what = fmt.Sprintf("step %d: job %d run %d ends with %d", i, ref.Job, ref.Run, code)
			step(what, func(s *sideEngine) error { return s.end(ref, code, now()) })
		case k < 8:
			id, ok := incr.someJob(rng, models.JobQueued)
			if !ok {
				continue
			}
			what = fmt.Sprintf("step %d: job %d cancelled", i, id)
			step(what, func(s *sideEngine) error {
				return s.ms.Cancel(context.Background(), id, "cancelled by its owner", now())
			})
		case k < 9:
			id, ok := incr.someJob(rng, models.JobRunning)
			if !ok {
				continue
			}
			what = fmt.Sprintf("step %d: job %d's cancel asked on another replica", i, id)
			step(what, func(s *sideEngine) error {
				return s.ms.RequestCancel(context.Background(), id, "cancelled on another replica", now())
			})
		default:
			u := users[rng.IntN(len(users))]
			if rng.IntN(2) == 0 {
				what = fmt.Sprintf("step %d: %s disabled", i, u)
				step(what, func(s *sideEngine) error {
					_, err := s.ms.DisableUser(context.Background(), u, "admin", now())
					return err
				})
			} else {
				what = fmt.Sprintf("step %d: %s enabled", i, u)
				step(what, func(s *sideEngine) error {
					_, err := s.ms.EnableUser(context.Background(), u, now())
					return err
				})
			}
		}
		for _, s := range sides {
			s.settle(t)
		}
		a, b := incr.decided(t), whole.decided(t)
		if !reflect.DeepEqual(a, b) {
			for k := range min(len(a), len(b)) {
				if !reflect.DeepEqual(a[k], b[k]) {
					t.Errorf("job %d: incremental %+v\nwhole %+v", a[k].ID, a[k], b[k])
				}
			}
			t.Fatalf("%s: the engines decided differently", what)
		}
	}
	if v := incr.store.view; !v.readAt.After(v.fullAt) {
		t.Fatal("the incremental side read every job whole: the test compared nothing")
	}
}

// sideEngine is one of the two engines of TestIncrementalPassDecidesAsAWholeRead.
type sideEngine struct {
	ms    *models.Store
	store Store
	eng   *engine.Engine
	nodes *sideNodes
}

func newSideEngine(t *testing.T, incremental bool, now func() time.Time) *sideEngine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	dsn := modelstest.SQLiteDSN(t)
	ms, err := models.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	for _, team := range []string{"vision", "nlp"} {
		if _, err := ms.CreateTeam(ctx, team, 8); err != nil {
			t.Fatal(err)
		}
	}
	for i, u := range []string{"alice", "bob", "carol", "dave"} {
		if _, err := ms.CreateUser(ctx, u, "s3cret", models.RoleResearcher, []string{"vision", "nlp"}[i%2]); err != nil {
			t.Fatal(err)
		}
	}
	store := New(ms)
	if !incremental {
		store.view = nil
	}
	sc, err := sched.New(sched.Config{Policy: "tiresias-l", ReserveAfterS: 120})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Store: store, Scheduler: sc, Interval: time.Hour, Now: now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Forecast: engine.ForecastConfig{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	nodes := &sideNodes{exits: eng.Exits(), now: now, runs: map[job.RunRef]string{}, start: time.Now(), eng: eng}
	for i := range 3 {
		if err := eng.AddNode(ctx, &sideNode{name: fmt.Sprintf("node%d", i), all: nodes}); err != nil {
			t.Fatal(err)
		}
	}
	return &sideEngine{ms: ms, store: store, eng: eng, nodes: nodes}
}

// settle has the engine take the changes so far, from idle to idle:
// one pass after a wake, and the pass after each exit of the runs it
// stopped. Each pass must follow the same events on both sides, so that
// the decisions that depend on the passes before them (reservations
// kept, runs handed over) agree: nothing may wake the engine while a
// pass is under way.
func (s *sideEngine) settle(t *testing.T) {
	t.Helper()
	before := s.eng.Stats().WholePass.Count
	s.eng.Wake()
	s.waitPass(t, before)
	for s.nodes.pending.Load() > 0 || s.eng.Stats().WholePass.Count <= s.nodes.lastRecord.Load() {
		if time.Since(s.nodes.start) > 5*time.Minute {
			t.Fatal("the engine did not settle")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitPass waits for a whole pass after the first passes of the engine.
func (s *sideEngine) waitPass(t *testing.T, passes uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for s.eng.Stats().WholePass.Count <= passes {
		if time.Now().After(deadline) {
			t.Fatal("no pass in a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// end ends run ref with code, as its machine reports it, and waits for
// the pass that follows its record.
func (s *sideEngine) end(ref job.RunRef, code int, at time.Time) error {
	node, ok := s.nodes.take(ref)
	if !ok {
		return fmt.Errorf("run %v does not run", ref)
	}
	recorded := make(chan uint64, 1)
	s.eng.Exits() <- job.Exit{Node: node, JobID: ref.Job, Run: ref.Run, ExitCode: code, At: at,
		Recorded: func() { recorded <- s.eng.Stats().WholePass.Count }}
	select {
	case passes := <-recorded:
		for s.eng.Stats().WholePass.Count <= passes {
			time.Sleep(time.Millisecond)
		}
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("the end of run %v was not recorded in a minute", ref)
	}
}

func (s *sideEngine) running() []job.RunRef {
	s.nodes.mu.Lock()
	defer s.nodes.mu.Unlock()
	refs := make([]job.RunRef, 0, len(s.nodes.runs))
	for ref := range s.nodes.runs {
		refs = append(refs, ref)
	}
	slices.SortFunc(refs, func(a, b job.RunRef) int { return int(a.Job - b.Job) })
	return refs
}

// someJob picks a job in state at random.
func (s *sideEngine) someJob(rng *rand.Rand, state job.State) (int64, bool) {
	js, err := s.ms.JobsChangedSince(context.Background(), time.Time{})
	if err != nil {
		return 0, false
	}
	var ids []int64
	for _, j := range js {
		if j.State == state && !j.Held() {
			ids = append(ids, j.ID)
		}
	}
	if len(ids) == 0 {
		return 0, false
	}
	return ids[rng.IntN(len(ids))], true
}

// decision is what a pass decided for one job.
type decision struct {
	ID        int64
	State     job.State
	Run       int64
	Placement []string
	Queue     models.QueueState
	Wait      sched.Wait
	Waits     bool
}

// decided is every job's decision, by ID.
func (s *sideEngine) decided(t *testing.T) []decision {
	t.Helper()
	js, err := s.ms.JobsChangedSince(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	waits := s.eng.Waits()
	out := make([]decision, len(js))
	for i, j := range js {
		w, ok := waits[j.ID]
		out[i] = decision{ID: j.ID, State: j.State, Run: j.Run, Placement: j.Placement, Queue: j.QueueState(), Wait: w, Waits: ok}
	}
	return out
}

// sideNodes are the runs of a side's simulated machines, which run until
// the test or the engine ends them; the engine's stops end at the side's
// clock.
type sideNodes struct {
	exits   chan<- job.Exit
	now     func() time.Time
	mu      sync.Mutex
	runs    map[job.RunRef]string
	pending atomic.Int64 // exits sent, not yet taken by the engine
	// lastRecord is the engine's whole passes when it last recorded an
	// exit of a run it stopped: the pass after it is the exit's.
	lastRecord atomic.Uint64
	start      time.Time
	eng        *engine.Engine
}

func (n *sideNodes) take(ref job.RunRef) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	node, ok := n.runs[ref]
	delete(n.runs, ref)
	return node, ok
}

type sideNode struct {
	name string
	all  *sideNodes
}

func (n *sideNode) Name() string { return n.name }

func (n *sideNode) Devices() []gpu.Device {
	out := make([]gpu.Device, 4)
	for i := range out {
		out[i] = gpu.Device{Index: i, Model: "H100", MemMiB: 80 << 10}
	}
	return out
}

func (n *sideNode) Resources() (int, int64) { return 64, 1 << 20 }

func (n *sideNode) Start(_ context.Context, s job.Spec) error {
	n.all.mu.Lock()
	defer n.all.mu.Unlock()
	n.all.runs[job.RunRef{Job: s.JobID, Run: s.Run}] = n.name
	return nil
}

func (n *sideNode) Stop(_ context.Context, ref job.RunRef) error {
	node, ok := n.all.take(ref)
	if !ok || node != n.name {
		return nil
	}
	// The exit waits in the engine's buffer, in the order of the stops,
	// and the engine takes all of a pass's together after it, as it
	// would take them were they all in: exits racing each other in would
	// make the passes between them, and so the decisions, differ from
	// one run to the next.
	n.all.pending.Add(1)
	n.all.exits <- job.Exit{Node: n.name, JobID: ref.Job, Run: ref.Run, ExitCode: 143, At: n.all.now(),
		Recorded: func() {
			n.all.lastRecord.Store(n.all.eng.Stats().WholePass.Count)
			n.all.pending.Add(-1)
		}}
	return nil
}

func (n *sideNode) Running() []job.RunRef {
	n.all.mu.Lock()
	defer n.all.mu.Unlock()
	var out []job.RunRef
	for ref, node := range n.all.runs {
		if node == n.name {
			out = append(out, ref)
		}
	}
	return out
}

func (n *sideNode) Sample(time.Time) []gpu.Sample { return nil }
