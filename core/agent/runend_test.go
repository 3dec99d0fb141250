package agent

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/internal/testprocs"
)

// TestRunEndsWithItsProcesses: a job whose processes leave its session
// and group every way a script can (escapes), each ignoring SIGTERM, has
// none left running once its end is reported, whether its first process
// exits or it is stopped, with cgroups and without; without them, only a
// daemon with a cleared environment is left (documented in
// descendants.go). With cgroups, the job's cgroup is gone too.
func TestRunEndsWithItsProcesses(t *testing.T) {
	testprocs.NeedPerl(t)
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
				Command: []string{"sh", "-c", testprocs.Script(testprocs.Perl, rest)}}); err != nil {
				t.Fatal(err)
			}
			es := testprocs.Read(t, a.jobDir(5))
			t.Cleanup(func() { testprocs.Kill(es) })
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
			testprocs.CheckLog(t, readLog(t, a, 5))
			for _, e := range es {
				switch {
				case !e.Alive():
				case e.Name == "hidden" && !tc.cgroups:
					t.Logf("without cgroups, %s (%d) outlives the run, as documented", e.Name, e.PID)
				default:
					t.Errorf("%s (%d) still runs after the run's end was reported (%+v)", e.Name, e.PID, ex)
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
