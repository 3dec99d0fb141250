package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
)

// reasonCounter counts the wait reasons the engine stores.
type reasonCounter struct {
	*memStore
	rows int
}

func (s *reasonCounter) SetReasons(ctx context.Context, reasons map[int64]string) error {
	s.rows += len(reasons)
	return s.memStore.SetReasons(ctx, reasons)
}

// TestStoredReasonsFollowTheEngines runs passes in which jobs end, start,
// move up the line and are cancelled, and checks the reasons the store
// gets against the engine's own (Waits, what storing every changed
// reason at once would store): after each pass every stored reason says
// the same in words, one whose words changed ("first in line") equal;
// a pass that moves jobs up the line stores none of theirs; and once
// reasonRefresh has passed, the store holds exactly the engine's.
func TestStoredReasonsFollowTheEngines(t *testing.T) {
	var jobs []Job
	for id := int64(1); id <= 20; id++ {
		jobs = append(jobs, Job{ID: id, GPUs: 1, SimDuration: 100, SubmittedAt: t0.Add(time.Duration(id) * time.Second)})
	}
	mem := newMemStore(jobs...)
	n := newFakeNode("n0", 2)
	e, clock := newTestEngine(t, mem, n)
	store := &reasonCounter{memStore: mem}
	e.cfg.Store = store
	ctx := context.Background()
	check := func(step string, exact bool) {
		t.Helper()
		want := e.Waits()
		mem.mu.Lock()
		defer mem.mu.Unlock()
		waiting := 0
		for id, j := range mem.jobs {
			if !j.State.Waiting() {
				continue
			}
			waiting++
			got, w := mem.waits[id], want[id].Reason
			switch {
			case w == "":
				t.Errorf("%s: job %d waits without a reason from the engine", step, id)
			case exact && got != w:
				t.Errorf("%s: job %d's stored reason %q, want %q", step, id, got, w)
			case !sameWords(got, w):
				t.Errorf("%s: job %d's stored reason %q does not say what %q says", step, id, got, w)
			}
		}
		if len(want) != waiting {
			t.Errorf("%s: the engine has %d reasons for %d waiting jobs", step, len(want), waiting)
		}
	}
	mustPass(t, e)
	check("first pass", true)
	if store.rows != 18 {
		t.Fatalf("first pass stored %d reasons, want all 18", store.rows)
	}
	// Job 1 ends and job 3 takes its GPU: the 17 others move up the line.
	clock.t = clock.t.Add(time.Second)
	store.rows = 0
	delete(n.running, 1)
	e.testExit(ctx, exit("n0", 1, 0, clock.t))
	mustPass(t, e)
	check("a start moved the line", false)
	if mem.state(3) != job.Running {
		t.Fatalf("job 3 is %s, want running", mem.state(3))
	}
	// Job 4 is now first in line and job 5 "1 job ahead": their words
	// changed, and only theirs.
	if store.rows != 2 || mem.waits[4] != e.Waits()[4].Reason || mem.waits[5] != e.Waits()[5].Reason {
		t.Errorf("stored %d reasons, job 4's %q and 5's %q; want only theirs, %q and %q",
			store.rows, mem.waits[4], mem.waits[5], e.Waits()[4].Reason, e.Waits()[5].Reason)
	}
	// A cancelled job is forgotten; the line moves again.
	if err := e.cfg.Store.Cancel(ctx, 10, "cancelled", clock.t); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(time.Second)
	mustPass(t, e)
	check("a cancel", false)
	if _, ok := storedReasonOf(e, 10); ok {
		t.Error("the cancelled job's stored reason still counts")
	}
	// Once reasonRefresh has passed, every reason is stored as it is.
	clock.t = clock.t.Add(reasonRefresh)
	store.rows = 0
	mustPass(t, e)
	check("after reasonRefresh", true)
	if store.rows == 0 {
		t.Error("no reason stored after reasonRefresh")
	}
	// Nothing changes: nothing is stored.
	store.rows = 0
	mustPass(t, e)
	if store.rows != 0 {
		t.Errorf("a pass that changed nothing stored %d reasons", store.rows)
	}
}

func TestSameWords(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"needs 1 GPU; 0 free; 41 jobs ahead in line", "needs 1 GPU; 3 free; 40 jobs ahead in line", true},
		{"2 jobs ahead in queue 1", "1 job ahead in queue 1", false},
		{"1 job ahead in line", "first in line", false},
		{"largest block 4 on gpu-07", "largest block 4 on gpu-08", true},
		{"largest block 4 on gpu-07", "largest block 4 on box", false},
		{"needs 8 GPUs", "needs 8 GPUs; 0 free", false},
		{"", "", true},
	}
	for _, tc := range tests {
		if got := sameWords(tc.a, tc.b); got != tc.want {
			t.Errorf("sameWords(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestSameWordsSkipsOnlyWhatTheWalkWould: the common prefix sameWords
// skips changes no answer: over random strings of digits and a few
// letters it answers as the plain walk from the start does.
func TestSameWordsSkipsOnlyWhatTheWalkWould(t *testing.T) {
	walk := func(a, b string) bool {
		i, j := 0, 0
		for i < len(a) && j < len(b) {
			da, db := isDigit(a[i]), isDigit(b[j])
			switch {
			case da && db:
				for i < len(a) && isDigit(a[i]) {
					i++
				}
				for j < len(b) && isDigit(b[j]) {
					j++
				}
			case a[i] != b[j]:
				return false
			default:
				i++
				j++
			}
		}
		return i == len(a) && j == len(b)
	}
	rng := rand.New(rand.NewPCG(7, 33))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "0123456789ab ;"[rng.IntN(14)]
		}
		return string(b)
	}
	for range 20000 {
		a := word(rng.IntN(40))
		b := a[:rng.IntN(len(a)+1)] + word(rng.IntN(12)) // a shared prefix, then anything
		if got, want := sameWords(a, b), walk(a, b); got != want {
			t.Fatalf("sameWords(%q, %q) = %v, the walk says %v", a, b, got, want)
		}
	}
}

// TestDeepReasonsStoredAtRefresh: a reason whose words changed is stored
// at once only for the first reasonsAtOnce waits of each queue; further back
// it is stored once reasonRefresh has passed, as a change of figures is.
// Job 1 ends and job 3 takes its GPU: job 4 becomes first in line and job
// 5 "1 job ahead", the first two waits, both with new words.
func TestDeepReasonsStoredAtRefresh(t *testing.T) {
	tests := []struct {
		atOnce int
		stored []int64 // of jobs 4 and 5, the ones stored at once
	}{
		{atOnce: 2, stored: []int64{4, 5}},
		{atOnce: 1, stored: []int64{4}},
		{atOnce: 0},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("atOnce=%d", tc.atOnce), func(t *testing.T) {
			var jobs []Job
			for id := int64(1); id <= 20; id++ {
				jobs = append(jobs, Job{ID: id, GPUs: 1, SimDuration: 100, SubmittedAt: t0.Add(time.Duration(id) * time.Second)})
			}
			mem := newMemStore(jobs...)
			n := newFakeNode("n0", 2)
			e, clock := newTestEngine(t, mem, n)
			e.reasonsAtOnce = tc.atOnce
			store := &reasonCounter{memStore: mem}
			e.cfg.Store = store
			mustPass(t, e)
			if store.rows != 18 {
				t.Fatalf("first pass stored %d reasons, want all 18: a job's first reason is stored at once", store.rows)
			}
			clock.t = clock.t.Add(time.Second)
			store.rows = 0
			delete(n.running, 1)
			e.testExit(context.Background(), exit("n0", 1, 0, clock.t))
			mustPass(t, e)
			if mem.state(3) != job.Running {
				t.Fatalf("job 3 is %s, want running", mem.state(3))
			}
			if store.rows != len(tc.stored) {
				t.Errorf("stored %d reasons, want %d (jobs %v)", store.rows, len(tc.stored), tc.stored)
			}
			want := e.Waits()
			for _, id := range []int64{4, 5} {
				mem.mu.Lock()
				got := mem.waits[id]
				mem.mu.Unlock()
				if at := slices.Contains(tc.stored, id); at != (got == want[id].Reason) {
					t.Errorf("job %d: stored %q, engine's %q; want it stored at once: %v", id, got, want[id].Reason, at)
				}
			}
			// Once reasonRefresh has passed, every reason is the engine's.
			clock.t = clock.t.Add(reasonRefresh)
			mustPass(t, e)
			want = e.Waits()
			mem.mu.Lock()
			defer mem.mu.Unlock()
			for id, w := range want {
				if got := mem.waits[id]; got != w.Reason {
					t.Errorf("after reasonRefresh job %d's stored reason %q, want %q", id, got, w.Reason)
				}
			}
		})
	}
}

// TestReasonsAtOnceByQueue: new words are stored at once for the first
// reasonsAtOnce waits of each queue, not of the pass's order as a whole
// (a queue behind a long one had none stored at once), and for waits the
// gate holds outside the order (position 0); deeper in a queue they wait
// for the refresh.
func TestReasonsAtOnceByQueue(t *testing.T) {
	mem := newMemStore()
	e, clock := newTestEngine(t, mem, newFakeNode("n0", 1))
	e.reasonsAtOnce = 2
	store := &reasonCounter{memStore: mem}
	e.cfg.Store = store
	waits := func(words string) []sched.Wait {
		return []sched.Wait{
			{JobID: 1, Queue: 0, Position: 1, Reason: words + " first in queue 0"},
			{JobID: 2, Queue: 0, Position: 2, Reason: words + " 1 job ahead in queue 0"},
			{JobID: 3, Queue: 0, Position: 3, Reason: words + " 2 jobs ahead in queue 0"},
			{JobID: 4, Queue: 1, Position: 1, Reason: words + " first in queue 1"},
			{JobID: 5, Position: 0, Reason: words + " waiting for job 1 to succeed"},
		}
	}
	ctx := context.Background()
	if err := e.recordReasons(ctx, waits("needs 1 GPU; 0 free;"), clock.t); err != nil {
		t.Fatal(err)
	}
	if store.rows != 5 {
		t.Fatalf("first reasons: %d stored, want all 5", store.rows)
	}
	store.rows = 0
	clock.t = clock.t.Add(time.Second)
	if err := e.recordReasons(ctx, waits("needs 1 GPU on one node;"), clock.t); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[int64]bool{1: true, 2: true, 3: false, 4: true, 5: true} {
		mem.mu.Lock()
		got := mem.waits[id]
		mem.mu.Unlock()
		if stored := strings.HasPrefix(got, "needs 1 GPU on one node;"); stored != want {
			t.Errorf("job %d: new words stored at once = %v, want %v (stored %q)", id, stored, want, got)
		}
	}
}

// storedReasonOf is job id's reason as e last stored it, while it counts
// (recordReasons: the job was among the waits of its last call).
func storedReasonOf(e *Engine, id int64) (string, bool) {
	r, ok := e.reasons.find(id, &cursor{})
	return r.text, ok
}

// failingRead fails the next read of the unfinished jobs while fail is
// set, as a database that drops a connection does.
type failingRead struct {
	*reasonCounter
	fail bool
}

func (s *failingRead) UnfinishedEngineJobs(ctx context.Context) ([]Job, error) {
	if s.fail {
		s.fail = false
		return nil, fmt.Errorf("read unfinished jobs: connection reset")
	}
	return s.reasonCounter.UnfinishedEngineJobs(ctx)
}

// TestReasonStoredAgainAfterAGap: a job's stored reason counts only while
// the job is among the waits of every pass that stores reasons. One held
// for a pass has its reason stored again when it waits again, though its
// words are the same: the store may say something else meanwhile (the
// hold's words). A pass that failed before it stored reasons (a database
// outage) changes nothing: the pass after it does not store every reason
// again, which at a long queue would be thousands of rows at once.
func TestReasonStoredAgainAfterAGap(t *testing.T) {
	tests := []struct {
		name string
		gap  func(t *testing.T, e *Engine, mem *memStore, store *failingRead)
		rows int // stored by the pass after the gap
	}{
		{"in every pass", func(t *testing.T, e *Engine, mem *memStore, store *failingRead) {
			mustPass(t, e)
		}, 0},
		{"held for a pass", func(t *testing.T, e *Engine, mem *memStore, store *failingRead) {
			mem.mu.Lock()
			mem.stalls[3] = job.MaxRequeueStalls // held: not read, no wait
			mem.mu.Unlock()
			mustPass(t, e)
			mem.mu.Lock()
			mem.stalls[3] = 0
			mem.mu.Unlock()
		}, 2}, // and job 4's, back from "1 job ahead" to "2 jobs ahead"
		{"a pass failed before storing its reasons", func(t *testing.T, e *Engine, mem *memStore, store *failingRead) {
			store.fail = true
			if err := e.pass(context.Background()); err == nil {
				t.Fatal("the pass whose read failed returned no error")
			}
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var jobs []Job
			for id := int64(1); id <= 4; id++ {
				jobs = append(jobs, Job{ID: id, GPUs: 1, SimDuration: 1000, SubmittedAt: t0.Add(time.Duration(id) * time.Second)})
			}
			mem := newMemStore(jobs...)
			if mem.stalls == nil {
				mem.stalls = make(map[int64]int)
			}
			e, clock := newTestEngine(t, mem, newFakeNode("n0", 1))
			store := &failingRead{reasonCounter: &reasonCounter{memStore: mem}}
			e.cfg.Store = store
			mustPass(t, e)
			if store.rows != 3 {
				t.Fatalf("first pass stored %d reasons, want 3 (jobs 2 to 4)", store.rows)
			}
			// Another writer's words in the store, which the engine does not read.
			mem.mu.Lock()
			mem.waits[3] = "held: requeued without progress too often"
			mem.mu.Unlock()
			clock.t = clock.t.Add(time.Second)
			tc.gap(t, e, mem, store)
			clock.t = clock.t.Add(time.Second)
			store.rows = 0
			mustPass(t, e)
			if store.rows != tc.rows {
				t.Errorf("the pass after the gap stored %d reasons, want %d", store.rows, tc.rows)
			}
			want := e.Waits()[3].Reason
			mem.mu.Lock()
			got := mem.waits[3]
			mem.mu.Unlock()
			if again := tc.rows > 0; again != (got == want) {
				t.Errorf("job 3's stored reason %q, the engine's %q: want it stored again %v", got, want, again)
			}
		})
	}
}

// TestStoredReasonsOfGoneJobsDropped: the stored reasons of jobs that no
// longer wait are dropped with the next pass's, so that a queue that
// drains leaves no thousands behind.
func TestStoredReasonsOfGoneJobsDropped(t *testing.T) {
	const n = 1100
	var jobs []Job
	for id := int64(1); id <= n; id++ {
		jobs = append(jobs, Job{ID: id, GPUs: 1, SimDuration: 1000, SubmittedAt: t0.Add(time.Duration(id) * time.Millisecond)})
	}
	mem := newMemStore(jobs...)
	e, clock := newTestEngine(t, mem, newFakeNode("n0", 1))
	mustPass(t, e)
	if got := e.reasons.size(); got != n-1 {
		t.Fatalf("first pass: %d stored reasons, want %d", got, n-1)
	}
	ctx := context.Background()
	for id := int64(3); id <= n; id++ {
		if err := mem.Cancel(ctx, id, "cancelled", clock.t); err != nil {
			t.Fatal(err)
		}
	}
	clock.t = clock.t.Add(time.Second)
	mustPass(t, e)
	if r, ok := storedReasonOf(e, 2); !ok || e.reasons.size() != 1 {
		t.Errorf("after the cancels: %d stored reasons, job 2's %q (counts: %v); want only job 2's", e.reasons.size(), r, ok)
	}
}
