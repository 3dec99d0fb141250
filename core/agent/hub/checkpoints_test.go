package hub

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/jobfiles"
	"github.com/gpuportal/gpuportal/internal/testarchive"
)

// folder is a job's checkpoint folder on a machine, as its archive: the
// hub reads it as it would through the agent.
type folder struct {
	mu    sync.Mutex
	body  []byte
	reads int
	gate  chan struct{} // when set, a read waits for it
}

func (f *folder) Archive(ctx context.Context, root, p string) (*jobfiles.Download, error) {
	f.mu.Lock()
	gate, body := f.gate, f.body
	f.reads++
	f.mu.Unlock()
	if root != jobfiles.JobRoot || p != "checkpoint" {
		return nil, errors.New("not the checkpoint folder")
	}
	if gate != nil {
		<-gate
	}
	return &jobfiles.Download{Body: io.NopCloser(bytes.NewReader(body)), Size: int64(len(body))}, nil
}
func (f *folder) List(context.Context, string, string) (*jobfiles.Listing, error) {
	return nil, errors.New("not here")
}
func (f *folder) Open(context.Context, string, string) (*jobfiles.Download, error) {
	return nil, errors.New("not here")
}
func (f *folder) Put(context.Context, string, string, int64, io.Reader) (*jobfiles.Entry, error) {
	return nil, errors.New("not here")
}

// ended says which jobs have ended.
type ended struct{ ids map[int64]bool }

func (e ended) Ended(_ context.Context, ids []int64) ([]int64, error) {
	var out []int64
	for _, id := range ids {
		if e.ids[id] {
			out = append(out, id)
		}
	}
	return out, nil
}
func (e ended) Account(context.Context, int64) (string, error) { return "alice", nil }

func newTestCopies(t *testing.T, dir string, f *folder, jobs JobStates) *checkpoints {
	t.Helper()
	c := newCheckpoints(dir, 1<<20, jobs, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.files = func(*remoteNode, int64, string) jobfiles.Files { return f }
	c.every = 0 // a copy as soon as the folder is still: see TestCheckpointCopiesSpaced
	return c
}

// fetch asks c for the copy a start's token names.
func fetch(c *checkpoints, token string) (int, string) {
	req := httptest.NewRequest(http.MethodGet, wire.CheckpointPath, nil)
	req.Header.Set(wire.CheckpointTokenHeader, token)
	rec := httptest.NewRecorder()
	c.serveCheckpoint(rec, req)
	return rec.Code, rec.Body.String()
}

// waitCopied waits until part k's copy is on disk and none is under way.
func waitCopied(t *testing.T, c *checkpoints, k partKey, at time.Time) copyMeta {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		kp := c.kept[k]
		var m copyMeta
		done := kp != nil && kp.making == nil
		if done {
			m = kp.meta
		}
		c.mu.Unlock()
		if done && m.At.Equal(at) {
			return m
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("part %v not copied as written %v", k, at)
	return copyMeta{}
}

// TestCheckpointCopies: a folder is copied once it holds still between
// two readings, not while it changes, not when too big; a start elsewhere
// gets the copy and a token good once; a run's end copies its last save
// at once, and a start that follows waits for that copy; the copies
// outlive a server restart and go once their job has ended.
func TestCheckpointCopies(t *testing.T) {
	dir := t.TempDir()
	t1 := time.Date(2026, 11, 30, 8, 0, 0, 123, time.UTC)
	f := &folder{body: testarchive.Folder(t, "checkpoint", map[string]string{"state": "save 1"}, t1.Add(time.Second))}
	jobs := ended{ids: map[int64]bool{}}
	c := newTestCopies(t, dir, f, jobs)
	a, b := &remoteNode{name: "a"}, &remoteNode{name: "b"}
	spec := job.Spec{JobID: 7, Run: 1, Command: []string{"train"}, Account: "alice"}
	if cp := c.started("a", spec); cp != nil {
		t.Fatalf("a first start got a copy: %+v", cp)
	}
	k := partKey{7, 0}
	usage := func(at time.Time, bytes int64) []job.Usage {
		return []job.Usage{{JobID: 7, Checkpoint: &job.CheckpointState{At: at, Run: 1, Bytes: bytes, Files: 1}}}
	}
	c.observe(a, usage(t1, 100))
	c.observe(a, usage(t1.Add(time.Second), 100)) // changed: still being written
	c.observe(b, usage(t1.Add(time.Second), 100)) // not the machine that runs it
	if f.reads != 0 {
		t.Fatalf("read %d times while the folder changed", f.reads)
	}
	c.observe(a, usage(t1.Add(time.Second), 2<<20)) // held still, but over the limit
	if f.reads != 0 {
		t.Fatalf("read a folder over the limit")
	}
	c.observe(a, usage(t1.Add(time.Second), 100))
	m := waitCopied(t, c, k, t1.Add(time.Second))
	if m.Run != 1 || m.Node != "a" || m.Bytes != int64(len(f.body)) {
		t.Errorf("copy %+v, want run 1's from a, %d bytes", m, len(f.body))
	}
	c.observe(a, usage(t1.Add(time.Second), 100))
	if f.reads != 1 {
		t.Errorf("read %d times, want once: the folder did not change", f.reads)
	}

	// The folder changes, and is read while the job writes to it: the
	// copy is dropped, the one before kept. The machine's clock then says
	// it held still half a second: copied at the first such reading.
	t15 := t1.Add(1500 * time.Millisecond)
	f.mu.Lock()
	f.body = testarchive.Folder(t, "checkpoint", map[string]string{"state": "save 1.5, torn"}, t15.Add(time.Millisecond))
	f.mu.Unlock()
	c.observe(a, usage(t15, 100))
	c.observe(a, usage(t15, 100))
	waitCopied(t, c, k, t1.Add(time.Second))
	if f.reads != 2 {
		t.Fatalf("read %d times, want the torn read too", f.reads)
	}
	t16, t17 := t1.Add(1600*time.Millisecond), t1.Add(1700*time.Millisecond)
	f.mu.Lock()
	f.body = testarchive.Folder(t, "checkpoint", map[string]string{"state": "save 1.7"}, t17)
	f.mu.Unlock()
	reading := func(at, now time.Time) []job.Usage {
		u := usage(at, 100)
		u[0].At = now
		return u
	}
	c.observe(a, reading(t16, t16.Add(100*time.Millisecond))) // written 0.1 s before
	c.observe(a, reading(t17, t17.Add(400*time.Millisecond))) // another save, 0.4 s before
	if f.reads != 2 {
		t.Fatalf("read %d times; want none while the folder is written", f.reads)
	}
	c.observe(a, reading(t17, t17.Add(600*time.Millisecond))) // still for 0.6 s
	if m := waitCopied(t, c, k, t17); f.reads != 3 || m.Bytes != int64(len(f.body)) {
		t.Errorf("copy %+v after %d reads; want the third read kept", m, f.reads)
	}

	// A copy is under way (it waits for the gate) when the run ends
	// with a last save: the copy of the last save is set to follow it
	// before the engine hears of the end, and the start that follows
	// gets it, and waits for both.
	f.mu.Lock()
	f.gate = make(chan struct{})
	f.mu.Unlock()
	c.observe(a, reading(t1.Add(1800*time.Millisecond), t1.Add(2400*time.Millisecond))) // changed, still by the clock
	c.observe(a, reading(t1.Add(1900*time.Millisecond), t1.Add(3000*time.Millisecond))) // waits for the next reading
	t2 := t1.Add(2 * time.Second)
	f.mu.Lock()
	f.body = testarchive.Folder(t, "checkpoint", map[string]string{"state": "the last save"}, t2)
	f.mu.Unlock()
	c.ended(a, job.Exit{Node: "a", JobID: 7, Run: 1, Checkpoint: &job.CheckpointState{At: t2, Run: 1, Bytes: 100, Files: 1}})
	cp := c.started("b", job.Spec{JobID: 7, Run: 2, Command: []string{"train"}, Account: "alice"})
	if cp == nil || cp.Run != 1 || cp.Node != "a" || !cp.At.Equal(t2) || cp.Token == "" {
		t.Fatalf("the start on b got %+v, want run 1's last save from a", cp)
	}
	got := make(chan string)
	go func() { _, body := fetch(c, cp.Token); got <- body }()
	select {
	case body := <-got:
		t.Fatalf("fetched %q before the copy was made", body)
	case <-time.After(50 * time.Millisecond):
	}
	close(f.gate)
	if body := <-got; body != string(f.body) {
		t.Errorf("fetched %d bytes, want the last save's %d", len(body), len(f.body))
	}
	if code, _ := fetch(c, cp.Token); code != http.StatusUnauthorized {
		t.Errorf("a token used twice: %d, want 401", code)
	}
	if code, _ := fetch(c, "made-up"); code != http.StatusUnauthorized {
		t.Errorf("a made-up token: %d, want 401", code)
	}
	if code, _ := fetch(c, ""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}

	// A session has no checkpoint folder, and gets no copy.
	if cp := c.started("b", job.Spec{JobID: 7, Run: 3, Command: []string{"sh"}, Session: &job.Session{Type: job.SessionTerminal}}); cp != nil {
		t.Errorf("a session got a copy: %+v", cp)
	}

	// A server restart finds the copy on disk.
	c2 := newTestCopies(t, dir, f, jobs)
	cp = c2.started("a", job.Spec{JobID: 7, Run: 3, Command: []string{"train"}})
	if cp == nil || !cp.At.Equal(t2) || cp.Run != 1 {
		t.Fatalf("after a restart the start got %+v, want the last save", cp)
	}
	if code, body := fetch(c2, cp.Token); code != http.StatusOK || body != string(f.body) {
		t.Errorf("after a restart: %d, %d bytes", code, len(body))
	}

	// The job ends: its copy goes at the next sweep.
	jobs.ids[7] = true
	c2.maybeSweep()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err1 := os.Stat(filepath.Join(dir, "7-0.tar.gz"))
		_, err2 := os.Stat(filepath.Join(dir, "7-0.json"))
		if os.IsNotExist(err1) && os.IsNotExist(err2) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended job's copy is still there: %v %v", err1, err2)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if cp := c2.started("a", job.Spec{JobID: 7, Run: 4, Command: []string{"train"}}); cp != nil {
		t.Errorf("a start after the sweep got %+v", cp)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 0 {
		t.Errorf("left in the folder: %v", left)
	}
}

// TestCheckpointCopiesSpaced: while a run goes, its folder is copied at
// most every copyEvery (a job that writes into it every second is not
// copied every second), but its last save, at its end, is copied at once.
func TestCheckpointCopiesSpaced(t *testing.T) {
	t1 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	f := &folder{body: testarchive.Folder(t, "checkpoint", map[string]string{"state": "1"}, t1)}
	c := newTestCopies(t, t.TempDir(), f, nil)
	c.every = time.Hour
	a := &remoteNode{name: "a"}
	c.started("a", job.Spec{JobID: 7, Run: 1, Command: []string{"train"}})
	k := partKey{7, 0}
	for i := range 5 {
		at := t1.Add(time.Duration(i) * time.Second)
		c.observe(a, []job.Usage{{JobID: 7, At: at.Add(time.Second), Checkpoint: &job.CheckpointState{At: at, Run: 1, Bytes: 1, Files: 1}}})
		if i == 0 {
			waitCopied(t, c, k, t1)
		}
	}
	if f.reads != 1 {
		t.Errorf("read %d times in 5 s of saves, want once an hour", f.reads)
	}
	last := t1.Add(5 * time.Second)
	f.mu.Lock()
	f.body = testarchive.Folder(t, "checkpoint", map[string]string{"state": "last"}, last)
	f.mu.Unlock()
	c.ended(a, job.Exit{Node: "a", JobID: 7, Run: 1, Checkpoint: &job.CheckpointState{At: last, Run: 1, Bytes: 4, Files: 1}})
	waitCopied(t, c, k, last)
	if f.reads != 2 {
		t.Errorf("read %d times, want the last save's at the end", f.reads)
	}
}

// TestCheckpointCopiesByPart: each part of a job on several machines has
// its own copy, and a start of a part brings that part's, wherever it
// lands.
func TestCheckpointCopiesByPart(t *testing.T) {
	t1 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	f := &folder{body: testarchive.Folder(t, "checkpoint", map[string]string{"state": "rank"}, t1)}
	c := newTestCopies(t, t.TempDir(), f, nil)
	gang := func(rank int) *job.Gang {
		return &job.Gang{Rank: rank, Nodes: []job.GangNode{{Name: "a", GPUs: 1}, {Name: "b", GPUs: 1}}}
	}
	a, b := &remoteNode{name: "a"}, &remoteNode{name: "b"}
	c.started("a", job.Spec{JobID: 9, Run: 1, Command: []string{"train"}, Gang: gang(0)})
	c.started("b", job.Spec{JobID: 9, Run: 1, Command: []string{"train"}, Gang: gang(1)})
	c.ended(a, job.Exit{Node: "a", JobID: 9, Run: 1, Checkpoint: &job.CheckpointState{Part: 0, At: t1, Run: 1, Bytes: 4, Files: 1}})
	waitCopied(t, c, partKey{9, 0}, t1)
	t2 := t1.Add(time.Second)
	f.mu.Lock()
	f.body = testarchive.Folder(t, "checkpoint", map[string]string{"state": "rank"}, t2)
	f.mu.Unlock()
	c.ended(b, job.Exit{Node: "b", JobID: 9, Run: 1, Checkpoint: &job.CheckpointState{Part: 1, At: t2, Run: 1, Bytes: 4, Files: 1}})
	waitCopied(t, c, partKey{9, 1}, t2)
	// Run 2 lands with the ranks swapped.
	r0 := c.started("b", job.Spec{JobID: 9, Run: 2, Command: []string{"train"}, Gang: gang(0)})
	r1 := c.started("a", job.Spec{JobID: 9, Run: 2, Command: []string{"train"}, Gang: gang(1)})
	if r0 == nil || r0.Node != "a" || !r0.At.Equal(t1) || r1 == nil || r1.Node != "b" || !r1.At.Equal(t2) {
		t.Errorf("rank 0 got %+v, rank 1 got %+v; want each its own rank's copy (a's at %v, b's at %v)", r0, r1, t1, t2)
	}
	if got := c.of(9); len(got) != 2 || got[0].Part != 0 || got[1].Part != 1 {
		t.Errorf("the job's copies: %+v, want parts 0 and 1 in order", got)
	}
}
