package agent

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// TestRunEndsWithItsProcesses: a job whose processes leave its session
// and group every way a script can (escapes), each ignoring SIGTERM, has
// none left running once its end is reported, whether its first process
// exits or it is stopped, with cgroups and without; without them, only a
// daemon with a cleared environment is left (documented in
// descendants.go). With cgroups, the job's cgroup is gone too.
func TestRunEndsWithItsProcesses(t *testing.T) {
	needPerl(t)
	for _, tc := range []struct {
		name    string
		cgroups bool
		stop    bool
	}{
		{"exits, without cgroups", false, false},
		{"stopped, without cgroups", false, true},
		{"exits, with cgroups", true, false},
		{"stopped, with cgroups", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cgroups {
				realCgroups(t)
			}
			a, exits := newLimitAgent(t, Config{Cgroups: tc.cgroups})
			if tc.cgroups && a.lim.cg == nil {
				t.Fatalf("cgroups are writable here, yet the agent has none: %s", a.lim.why)
			}
			rest := "exit 0"
			if tc.stop {
				rest = "sleep 1000"
			}
			if err := a.Start(context.Background(), job.Spec{JobID: 5, Run: 2, GPUs: []int{0},
				Command: []string{"sh", "-c", escapes(rest)}}); err != nil {
				t.Fatal(err)
			}
			es := readEscapes(t, a.jobDir(5))
			t.Cleanup(func() {
				for _, e := range es {
					if e.alive() {
						_ = syscall.Kill(e.pid, syscall.SIGKILL)
					}
				}
			})
			waitLog(t, a, 5, "started")
			if tc.stop {
				if err := a.Stop(context.Background(), job.RunRef{Job: 5, Run: 2}); err != nil {
					t.Fatal(err)
				}
			}
			var ex job.Exit
			select {
			case ex = <-exits:
			case <-time.After(30 * time.Second):
				t.Fatal("no exit within 30 s")
			}
			// The processes did leave as meant (the script's own words).
			checkEscaped(t, readLog(t, a, 5))
			for _, e := range es {
				switch {
				case !e.alive():
				case e.name == "hidden" && !tc.cgroups:
					t.Logf("without cgroups, %s (%d) outlives the run, as documented", e.name, e.pid)
				default:
					t.Errorf("%s (%d) still runs after the run's end was reported (%+v)", e.name, e.pid, ex)
				}
			}
			if tc.cgroups {
				for ctl, d := range a.lim.cg.job(a.lim.cg.name(5)).dirs {
					if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("the job's %s cgroup %s is still there: %v", ctl, d, err)
					}
				}
			}
		})
	}
}

// checkEscaped checks the lines escapes printed: "NAME PID PPID PGID
// SID" of each process and "main PID".
func checkEscaped(t *testing.T, log string) {
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
	if len(main) != 1 {
		t.Fatalf("the script did not print its PID:\n%s", log)
	}
	m := main[0]
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
		if (pgid == pid) != tc.ownGroup || (pgid == m) == tc.ownGroup || (sid == pid) != tc.ownSes || (sid == m) == tc.ownSes {
			t.Errorf("%s: pid %d pgid %d sid %d, the job's %d: own group %v and session %v expected", tc.name, pid, pgid, sid, m, tc.ownGroup, tc.ownSes)
		}
	}
}

func readLog(t *testing.T, a *Local, id int64) string {
	t.Helper()
	b, err := os.ReadFile(a.LogPath(id))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitLog waits until job id's output holds want.
func waitLog(t *testing.T, a *Local, id int64, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(a.LogPath(id))
		if strings.Contains(string(b), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d did not print %q:\n%s", id, want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
