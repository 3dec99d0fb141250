package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needPerl fails under CI, and skips elsewhere, without perl: the tests'
// way to call setpgid(0, 0) from a script (Debian's perl-base is
// essential, so CI has it).
func needPerl(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("perl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this test calls setpgid through perl: %v", err)
		}
		t.Skipf("needs perl: %v", err)
	}
}

// escapes is a shell script that starts a process each way a job's
// process leaves its session or group, each ignoring SIGTERM and writing
// its PID to NAME.pid in the current folder, then prints each one's PID,
// parent, group and session, and "started", and goes on with rest:
//
//	group:  a plain background child (stays in the group)
//	setsid: setsid, a session and group of its own
//	dfork:  a double fork: an orphan in the group
//	pgid:   setpgid(0, 0): a group of its own in the same session
//	daemon: setsid and a double fork: an orphan in a session of its own
//	hidden: the same with a cleared environment (env -i); only a cgroup
//	        holds it
func escapes(rest string) string {
	return `
sh -c 'trap "" TERM; echo $$ > group.pid; exec sleep 1000' &
setsid sh -c 'trap "" TERM; echo $$ > setsid.pid; exec sleep 1000' &
(sh -c 'trap "" TERM; echo $$ > dfork.pid; exec sleep 1000' &) &
perl -e '$SIG{TERM} = "IGNORE"; setpgrp(0, 0); open(my $f, ">", "pgid.pid") or die; print $f $$; close $f; exec "sleep", "1000"' &
(setsid sh -c 'trap "" TERM; echo $$ > daemon.pid; exec sleep 1000' &) &
(setsid sh -c 'trap "" TERM; echo $$ > hidden.pid; exec env -i sleep 1000' &) &
for f in group setsid dfork pgid daemon hidden; do
	while [ ! -s $f.pid ]; do sleep 0.02; done
	echo "$f $(cut -d' ' -f1,4,5,6 /proc/$(cat $f.pid)/stat)"
done
echo "main $$"
echo started
` + rest
}

var escapeNames = []string{"group", "setsid", "dfork", "pgid", "daemon", "hidden"}

// escaped is one process a script of escapes started.
type escaped struct {
	name  string
	pid   int
	start uint64
}

// readEscapes reads the PIDs that escapes wrote in dir and the processes'
// start times, once they are all written.
func readEscapes(t *testing.T, dir string) []escaped {
	t.Helper()
	var out []escaped
	for _, n := range escapeNames {
		var pid int
		deadline := time.Now().Add(20 * time.Second)
		for {
			b, err := os.ReadFile(filepath.Join(dir, n+".pid"))
			if err == nil {
				if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s.pid not written in %s: %v", n, dir, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		e := escaped{name: n, pid: pid}
		if p, ok := readProc(pid); ok {
			e.start = p.start
		}
		out = append(out, e)
	}
	return out
}

// alive reports whether the process still runs: not gone, not a zombie,
// and not another process under a reused ID.
func (e escaped) alive() bool {
	p, ok := readProc(e.pid)
	return ok && p.state != "Z" && p.start == e.start
}

// TestRunProcs: a run's processes are found by session, group, descent
// and environment, whichever way they left the first process; an orphan
// in a session of its own with a cleared environment is not (only a
// cgroup holds it); reap ends them; a process whose ID now names another
// is never signalled.
func TestRunProcs(t *testing.T) {
	needPerl(t)
	dir := t.TempDir()
	since, err := bootTicks()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", escapes("sleep 1000"))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	marks := []string{"GPUPORTAL_CHECKPOINT_DIR=" + dir, "GPUPORTAL_RUN=3"}
	cmd.Env = append(os.Environ(), marks...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	es := readEscapes(t, dir)
	t.Cleanup(func() {
		for _, e := range es {
			if e.alive() {
				_ = syscall.Kill(e.pid, syscall.SIGKILL)
			}
		}
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
		if want := e.name != "hidden"; found[e.pid] != want {
			t.Errorf("%s (%d): found %v, want %v", e.name, e.pid, found[e.pid], want)
		}
	}

	// A process whose start time differs (its ID reused) is left alone.
	hidden := es[slices.IndexFunc(es, func(e escaped) bool { return e.name == "hidden" })]
	(proc{pid: hidden.pid, start: hidden.start + 1}).signal(syscall.SIGKILL)
	time.Sleep(50 * time.Millisecond)
	if !hidden.alive() {
		t.Error("signal ended a process whose start time differs")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.reap(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if want := e.name == "hidden"; e.alive() != want {
			t.Errorf("after reap, %s (%d) alive: %v, want %v", e.name, e.pid, !want, want)
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
