package agent

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/internal/testprocs"
)

// TestRunProcs: a run's processes are found by session, group, descent
// and environment, whichever way they left the first process; an orphan
// in a session of its own with a cleared environment is not (only a
// cgroup holds it); reap ends them; a process whose ID now names another
// is never signalled.
func TestRunProcs(t *testing.T) {
	testprocs.NeedPerl(t)
	dir := t.TempDir()
	since, err := bootTicks()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", testprocs.Script(testprocs.Perl, "sleep 1000"))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	marks := []string{"GPUPORTAL_CHECKPOINT_DIR=" + dir, "GPUPORTAL_RUN=3"}
	cmd.Env = append(os.Environ(), marks...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	es := testprocs.Read(t, dir)
	t.Cleanup(func() {
		testprocs.Kill(es)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	r := runProcs{leader: cmd.Process.Pid, uid: os.Getuid(), since: since, marks: marks}
	// Another run's processes (the same job's earlier run) are not this
	// one's.
	other := r
	other.leader, other.marks = 1<<30, []string{"GPUPORTAL_CHECKPOINT_DIR=" + dir, "GPUPORTAL_RUN=2"}
	if ps, err := other.find(); err != nil || len(ps) != 0 {
		t.Errorf("another run's processes: %v, %v; want none", ps, err)
	}

	ps, err := r.find()
	if err != nil {
		t.Fatal(err)
	}
	found := map[int]bool{}
	for _, p := range ps {
		found[p.pid] = true
	}
	if !found[cmd.Process.Pid] {
		t.Errorf("the first process %d is not among %v", cmd.Process.Pid, ps)
	}
	for _, e := range es {
		if want := e.Name != "hidden"; found[e.PID] != want {
			t.Errorf("%s (%d): found %v, want %v", e.Name, e.PID, found[e.PID], want)
		}
	}

	// A process whose start time differs (its ID reused) is left alone.
	hidden := es[slices.IndexFunc(es, func(e testprocs.Proc) bool { return e.Name == "hidden" })]
	(proc{pid: hidden.PID, start: hidden.Start + 1}).signal(syscall.SIGKILL)
	time.Sleep(50 * time.Millisecond)
	if !hidden.Alive() {
		t.Error("signal ended a process whose start time differs")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.reap(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if want := e.Name == "hidden"; e.Alive() != want {
			t.Errorf("after reap, %s (%d) alive: %v, want %v", e.Name, e.PID, !want, want)
		}
	}
}

func TestBootTicks(t *testing.T) {
	before, err := bootTicks()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	p, ok := readProc(cmd.Process.Pid)
	if !ok || p.start < before {
		t.Errorf("a process started after %d ticks has start %d (%v)", before, p.start, ok)
	}
}
