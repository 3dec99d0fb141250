package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/internal/testneed"
)

// cgroupMount is where this machine mounts a cgroup file system: the v2
// hierarchy (fstype cgroup2), or the v1 one with controller ctl; "" when
// it has none.
func cgroupMount(t *testing.T, fstype, ctl string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[2] != fstype {
			continue
		}
		if ctl == "" || slices.Contains(strings.Split(f[3], ","), ctl) {
			return f[1]
		}
	}
	return ""
}

// testCgroup makes a cgroup of this test under mount, removed at the
// end; it skips where none can be made (not root, no such hierarchy).
func testCgroup(t *testing.T, mount, what string) string {
	t.Helper()
	if mount == "" {
		testneed.Missing(t, "this machine has no %s", what)
	}
	d := filepath.Join(mount, fmt.Sprintf("gpuportal-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(d, 0o755); err != nil {
		testneed.Missing(t, "cannot make a cgroup in %s (%s): %v", mount, what, err)
	}
	t.Cleanup(func() {
		_ = removeCgroupTree(d, mount)
	})
	return d
}

// forkLoop starts, inside the cgroups dirs, a shell that forks a sleeper
// that ignores SIGTERM every 10 ms, and some that leave its session; it
// returns once the shell has forked a few.
func forkLoop(t *testing.T, dirs []string) *exec.Cmd {
	t.Helper()
	var join strings.Builder
	for _, d := range dirs {
		fmt.Fprintf(&join, "echo $$ > %s/cgroup.procs || exit 9; ", d)
	}
	cmd := exec.Command("sh", "-c", join.String()+`exec sh -c '
(setsid sh -c "trap \"\" TERM; exec sleep 1000" &) &
setsid sh -c "trap \"\" TERM; exec sleep 1000" &
while :; do sh -c "trap \"\" TERM; exec sleep 1000" & sleep 0.01; done'`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	j := &JobCgroup{dirs: map[string]string{"x": dirs[0]}}
	for deadline := time.Now().Add(10 * time.Second); len(j.procs()) < 6; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the fork loop did not start in %s: %v", dirs[0], j.procs())
		}
	}
	return cmd
}

// TestCgroupKill: each way a job's cgroup ends its processes ends a shell
// that keeps forking sleepers that ignore SIGTERM, with those that left
// its session: the kernel's cgroup.kill (v2), freezing under v2
// (cgroup.freeze, for kernels before 5.14) and v1 (the freezer), and
// killing one by one (a v1 host without a freezer). Remove then leaves
// no folder.
func TestCgroupKill(t *testing.T) {
	v2 := cgroupMount(t, "cgroup2", "")
	v1cpu, v1freezer := cgroupMount(t, "cgroup", "cpu"), cgroupMount(t, "cgroup", "freezer")
	for _, tc := range []struct {
		name string
		// job makes the job's cgroup; kill ends its processes once.
		job  func(t *testing.T) *JobCgroup
		kill func(ctx context.Context, j *JobCgroup)
	}{
		{"v2: cgroup.kill", func(t *testing.T) *JobCgroup {
			return &JobCgroup{version: 2, dirs: map[string]string{"cpu": testCgroup(t, v2, "cgroup v2 hierarchy")}}
		}, nil},
		{"v2: frozen, then killed", func(t *testing.T) *JobCgroup {
			return &JobCgroup{version: 2, dirs: map[string]string{"cpu": testCgroup(t, v2, "cgroup v2 hierarchy")}}
		}, func(ctx context.Context, j *JobCgroup) { freezeKill(ctx, j.dirs["cpu"], 2) }},
		{"v1: the freezer", func(t *testing.T) *JobCgroup {
			return &JobCgroup{version: 1, dirs: map[string]string{
				"cpu": testCgroup(t, v1cpu, "v1 cpu hierarchy"), "freezer": testCgroup(t, v1freezer, "v1 freezer hierarchy")}}
		}, func(ctx context.Context, j *JobCgroup) { freezeKill(ctx, j.dirs["freezer"], 1) }},
		{"v1: one by one", func(t *testing.T) *JobCgroup {
			return &JobCgroup{version: 1, dirs: map[string]string{"cpu": testCgroup(t, v1cpu, "v1 cpu hierarchy")}}
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := tc.job(t)
			cmd := forkLoop(t, j.unique())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tc.kill != nil {
				// This way alone ends them all, the forking shell too.
				tc.kill(ctx, j)
				for deadline := time.Now().Add(5 * time.Second); len(j.procs()) > 0; time.Sleep(killPoll) {
					if time.Now().After(deadline) {
						t.Fatalf("left after one pass: %v", j.procs())
					}
				}
			}
			if err := j.Remove(ctx); err != nil {
				t.Fatal(err)
			}
			var ee *exec.ExitError
			if err := cmd.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Errorf("the fork loop ended with %v, want SIGKILL", err)
			}
			for _, d := range j.unique() {
				if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s is still there: %v", d, err)
				}
			}
		})
	}
}

// TestCgroupKillBounded: a process that does not go (here a folder that
// is no cgroup lists one above the kernel's largest process ID) makes
// Kill give up when its context ends, saying how many are left.
func TestCgroupKillBounded(t *testing.T) {
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), fmt.Appendf(nil, "%d\n", 1<<23), 0o644); err != nil {
		t.Fatal(err)
	}
	j := &JobCgroup{version: 1, dirs: map[string]string{"cpu": d}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := j.Kill(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 left") {
		t.Errorf("Kill: %v; want the deadline, with 1 process left", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Kill took %v past its deadline", took)
	}
}

// TestStrayJobCgroups: an agent that starts ends the processes of the
// job cgroups an earlier process of it left (same machine name and work
// folder: its watchdog ended only their process groups) and removes the
// cgroups; another agent's are left alone.
func TestStrayJobCgroups(t *testing.T) {
	realCgroups(t)
	work, other := t.TempDir(), t.TempDir()
	cgs, err := DetectCgroups(DefaultCgroupRoot)
	if err != nil {
		t.Fatal(err)
	}
	var sleepers []*exec.Cmd
	var jobs []*JobCgroup
	for _, w := range []string{work, other} {
		cgs.agent = agentKey("n0", w)
		j, err := cgs.New(7)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
		s := exec.Command("sleep", "1000")
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		sleepers = append(sleepers, s)
		if err := j.Add(func() ([]int, error) { return []int{s.Process.Pid}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range sleepers {
			_ = s.Process.Kill()
		}
		_ = jobs[1].Remove(context.Background())
	})
	a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 1, 8192), WorkDir: work, Cgroups: true}, make(chan job.Exit, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	var ee *exec.ExitError
	if err := sleepers[0].Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the earlier process's job ended with %v, want SIGKILL", err)
	}
	if _, err := os.Stat(jobs[0].Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("its cgroup %s is still there: %v", jobs[0].Path(), err)
	}
	if p, ok := readProc(sleepers[1].Process.Pid); !ok || p.state == "Z" {
		t.Error("another agent's job was ended")
	}
}
