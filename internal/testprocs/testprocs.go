// Package testprocs is for tests that a job's processes end with it: a
// shell script whose children leave the job's session and process group
// every way a script can, each writing its PID to a file, and checks
// that those processes are gone, on the machine or in a container's PID
// namespace.
package testprocs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Names are the processes Script starts, in order:
//
//	group:  a plain background child (stays in the job's group)
//	setsid: setsid: a session and group of its own
//	dfork:  a double fork: an orphan in the group
//	pgid:   setpgid(0, 0): a group of its own in the same session
//	daemon: setsid and a double fork: an orphan in a session of its own
//	hidden: the same with a cleared environment (env -i)
var Names = []string{"group", "setsid", "dfork", "pgid", "daemon", "hidden"}

// Perl runs a command in a process group of its own (setpgid(0, 0)) on a
// machine with perl: Debian's perl-base is essential.
const Perl = `perl -e 'setpgrp(0, 0); exec @ARGV or die "exec: $!"'`

// Script is a shell script that starts the processes of Names, each
// ignoring SIGTERM and writing its PID to NAME.pid in the current folder
// (setpgid is the command prefix that runs a command in a group of its
// own: Perl, or a program of an image), prints for each, and for itself
// (main), "NAME PID PPID PGID SID", then "started", and goes on with
// rest.
func Script(setpgid, rest string) string {
	return `
sh -c 'trap "" TERM; echo $$ > group.pid; exec sleep 1000' &
setsid sh -c 'trap "" TERM; echo $$ > setsid.pid; exec sleep 1000' &
(sh -c 'trap "" TERM; echo $$ > dfork.pid; exec sleep 1000' &) &
` + setpgid + ` sh -c 'trap "" TERM; echo $$ > pgid.pid; exec sleep 1000' &
(setsid sh -c 'trap "" TERM; echo $$ > daemon.pid; exec sleep 1000' &) &
(setsid env -i /bin/sh -c 'trap "" TERM; echo $$ > hidden.pid; exec sleep 1000' &) &
for f in group setsid dfork pgid daemon hidden; do
	while [ ! -s $f.pid ]; do sleep 0.02; done
	echo "$f $(cut -d' ' -f1,4,5,6 /proc/$(cat $f.pid)/stat)"
done
echo "main $(cut -d' ' -f1,4,5,6 /proc/$$/stat)"
echo started
` + rest
}

// NeedPerl fails under CI, and skips elsewhere, without perl (Perl).
func NeedPerl(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("perl"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this test calls setpgid through perl: %v", err)
		}
		t.Skipf("needs perl: %v", err)
	}
}

// Proc is one process Script started.
type Proc struct {
	Name  string
	PID   int
	Start uint64 // clock ticks after boot; 0: it had already gone when read
}

// Read waits until Script has written every PID file in dir and returns
// the processes, with their start times.
func Read(t testing.TB, dir string) []Proc {
	t.Helper()
	var out []Proc
	for _, n := range Names {
		var pid int
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var b []byte
			if b, err = os.ReadFile(filepath.Join(dir, n+".pid")); err == nil {
				if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s.pid not written in %s: %v", n, dir, err)
			}
		}
		p := Proc{Name: n, PID: pid}
		_, p.Start, _ = stat(pid)
		out = append(out, p)
	}
	return out
}

// stat reads a process's state and start time; false when it is gone.
func stat(pid int) (state string, start uint64, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", 0, false
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return f[0], start, err == nil
}

// Alive reports whether the process still runs: not gone, not a zombie,
// and not another process under a reused ID.
func (p Proc) Alive() bool {
	state, start, ok := stat(p.PID)
	return ok && p.Start != 0 && state != "Z" && start == p.Start
}

// Kill ends those of ps still alive, for a test's cleanup.
func Kill(ps []Proc) {
	for _, p := range ps {
		if p.Alive() {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
		}
	}
}

// WaitGone fails the test unless every process of ps is gone within d.
func WaitGone(t testing.TB, ps []Proc, d time.Duration, why string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var left []string
		for _, p := range ps {
			if p.Alive() {
				left = append(left, fmt.Sprintf("%s (%d)", p.Name, p.PID))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: still running %v later: %s", why, d, strings.Join(left, ", "))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CheckLog checks the lines Script printed in log: that each process did
// leave the job's session or group as meant.
func CheckLog(t testing.TB, log string) {
	t.Helper()
	got := map[string][]int{}
	for _, line := range strings.Split(log, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		var ns []int
		for _, s := range f[1:] {
			n, err := strconv.Atoi(s)
			if err != nil {
				break
			}
			ns = append(ns, n)
		}
		got[f[0]] = ns
	}
	main := got["main"]
	if len(main) != 4 {
		t.Fatalf("the script did not print its own line:\n%s", log)
	}
	mgroup, msession := main[2], main[3]
	for _, tc := range []struct {
		name             string
		ownGroup, ownSes bool
	}{
		{"group", false, false}, {"dfork", false, false}, {"pgid", true, false},
		{"setsid", true, true}, {"daemon", true, true}, {"hidden", true, true},
	} {
		p := got[tc.name]
		if len(p) != 4 {
			t.Errorf("no line for %s:\n%s", tc.name, log)
			continue
		}
		pid, pgid, sid := p[0], p[2], p[3]
		if (pgid == pid) != tc.ownGroup || (pgid == mgroup) == tc.ownGroup || (sid == pid) != tc.ownSes || (sid == msession) == tc.ownSes {
			t.Errorf("%s: pid %d pgid %d sid %d, the job's group %d and session %d: want a group of its own %v, a session of its own %v",
				tc.name, pid, pgid, sid, mgroup, msession, tc.ownGroup, tc.ownSes)
		}
	}
}

// InNamespace maps ps, whose PIDs are those of the PID namespace of
// process init (a container's init, as the machine sees it), to the
// machine's PIDs, with their start times. It fails the test for one that
// is not running there.
func InNamespace(t testing.TB, init int, ps []Proc) []Proc {
	t.Helper()
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", init))
	if err != nil {
		t.Fatalf("the PID namespace of %d: %v", init, err)
	}
	host := map[int]int{} // namespace PID -> machine PID
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if n, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err != nil || n != ns {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				f := strings.Fields(v)
				if inner, err := strconv.Atoi(f[len(f)-1]); err == nil {
					host[inner] = pid
				}
			}
		}
	}
	out := make([]Proc, 0, len(ps))
	for _, p := range ps {
		h, ok := host[p.PID]
		if !ok {
			t.Fatalf("%s (PID %d in the container) is not running in its PID namespace", p.Name, p.PID)
		}
		q := Proc{Name: p.Name, PID: h}
		_, q.Start, _ = stat(h)
		out = append(out, q)
	}
	return out
}
