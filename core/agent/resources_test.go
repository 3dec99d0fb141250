package agent

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/internal/testneed"
)

// busyJob is a command that burns CPU until stopped: the test binary as
// TestCPUBoundHelper (two threads, progress lines every 20 ms).
func busyJob(t *testing.T) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"sh", "-c", helperEnv + "=1 exec \"$0\" -test.run='^TestCPUBoundHelper$'", exe}
}

func newLimitAgent(t *testing.T, cfg Config) (*Local, chan job.Exit) {
	t.Helper()
	exits := make(chan job.Exit, 8)
	cfg.Name, cfg.Backend, cfg.WorkDir, cfg.Grace = "n0", gpu.NewSim("n0", 4, 8192), t.TempDir(), time.Second
	a, err := New(cfg, exits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	return a, exits
}

func usageOf(t *testing.T, a *Local, id int64) job.Usage {
	t.Helper()
	for _, u := range a.JobUsage(time.Now()) {
		if u.JobID == id {
			return u
		}
	}
	t.Fatalf("no usage for job %d", id)
	return job.Usage{}
}

// TestLimitsFallback: where cgroups cannot be written, the job runs
// anyway, its log and its usage say why its limits are not enforced, and
// its use is read from /proc.
func TestLimitsFallback(t *testing.T) {
	a, _ := newLimitAgent(t, Config{Cgroups: true, CgroupRoot: t.TempDir()})
	if err := a.Start(context.Background(), job.Spec{JobID: 3, Command: busyJob(t), GPUs: []int{0},
		Resources: &job.Resources{CPUMilli: 500, MemMiB: 1024}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // about time: a window of CPU use to read
	u := usageOf(t, a, 3)
	if u.Enforced || !strings.HasPrefix(u.Note, job.NotEnforcedPrefix) || !strings.Contains(u.Note, "cgroups not writable") {
		t.Errorf("usage %+v: want unenforced with the reason", u)
	}
	if u.UsedCPUMilli <= 0 || u.UsedMemMiB <= 0 || u.CPUMilli != 500 {
		t.Errorf("usage %+v: want the busy job's CPU (two threads, unlimited) and memory from /proc", u)
	}
	log, _ := os.ReadFile(a.LogPath(3))
	if !strings.Contains(string(log), "gpuportal: "+job.NotEnforcedPrefix) {
		t.Errorf("log does not say the limits are not enforced:\n%.500s", log)
	}
	off, _ := newLimitAgent(t, Config{})
	if off.lim.why == "" || off.lim.cg != nil {
		t.Errorf("agent without Cgroups: why %q, cgroups %v", off.lim.why, off.lim.cg)
	}
}

// realCgroups skips the test where this machine's cgroups are not
// writable (not root, no cgroup file system).
func realCgroups(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		testneed.Missing(t, "cgroups are Linux only")
	}
	if _, err := DetectCgroups(DefaultCgroupRoot); err != nil {
		testneed.Missing(t, "cgroups not writable here: %v", err)
	}
}

// TestLimitsEnforced: with writable cgroups, a job that would burn two
// cores is held to its quota, and a resize lifts it.
func TestLimitsEnforced(t *testing.T) {
	realCgroups(t)
	a, _ := newLimitAgent(t, Config{Cgroups: true})
	if err := a.Start(context.Background(), job.Spec{JobID: 9, Command: busyJob(t), GPUs: []int{0},
		Resources: &job.Resources{CPUMilli: 250, MemMiB: 512}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	usageOf(t, a, 9)                    // start a fresh window
	time.Sleep(1500 * time.Millisecond) // about time: the window of CPU use
	u := usageOf(t, a, 9)
	// How much CPU the job gets depends on how busy the machine is (a
	// timed assertion would be flaky); the quota files are checked below.
	if !u.Enforced || u.Note != "" || u.UsedCPUMilli < 0 || u.UsedMemMiB <= 0 {
		t.Fatalf("usage %+v: want enforced, with its use reported", u)
	}
	if err := a.Resize(context.Background(), 9, job.Resources{CPUMilli: 1500, MemMiB: 512}); err != nil {
		t.Fatal(err)
	}
	if u := usageOf(t, a, 9); u.CPUMilli != 1500 {
		t.Errorf("after resize to 1.5 cores: %+v", u)
	}
	// The use then depends on how busy this machine is; the quota not.
	a.lim.mu.Lock()
	dir := a.lim.jobs[9].cg.Path()
	a.lim.mu.Unlock()
	file, want := "cpu.cfs_quota_us", "150000"
	if _, err := os.Stat(dir + "/cpu.max"); err == nil {
		file, want = "cpu.max", "150000 100000"
	}
	if b, err := os.ReadFile(dir + "/" + file); err != nil || strings.TrimSpace(string(b)) != want {
		t.Errorf("%s/%s = %q, %v; want %q", dir, file, b, err, want)
	}
	// Memory is held softly: never a limit that gets the job killed.
	a.lim.mu.Lock()
	mdir := a.lim.jobs[9].cg.dirs["memory"]
	a.lim.mu.Unlock()
	file, hard := "memory.soft_limit_in_bytes", "memory.limit_in_bytes"
	if _, err := os.Stat(mdir + "/memory.high"); err == nil {
		file, hard = "memory.high", "memory.max"
	}
	if b, err := os.ReadFile(mdir + "/" + file); err != nil || strings.TrimSpace(string(b)) != "536870912" {
		t.Errorf("%s/%s = %q, %v; want 512 MiB", mdir, file, b, err)
	}
	if b, err := os.ReadFile(mdir + "/" + hard); err == nil && strings.TrimSpace(string(b)) == "536870912" {
		t.Errorf("%s/%s is the allocation: a hard memory limit", mdir, hard)
	}
}

// TestAgentProfilesJob: a job started with a profiling request is
// profiled through its cgroup from its progress lines, and its usage
// carries a curve whose rate rises with the quota.
func TestAgentProfilesJob(t *testing.T) {
	realCgroups(t)
	a, _ := newLimitAgent(t, Config{Cgroups: true,
		Profile: ProfileConfig{Steps: 3, Warmup: 300 * time.Millisecond, Window: 700 * time.Millisecond}})
	if err := a.Start(context.Background(), job.Spec{JobID: 11, Command: busyJob(t), GPUs: []int{0},
		Resources: &job.Resources{CPUMilli: 100, PropCPUMilli: 100, ProfileMaxMilli: 500}}); err != nil {
		t.Fatal(err)
	}
	// The rates depend on how much CPU this machine has to spare, so only
	// the steps are checked; the curve's shape is a benchmark's business.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		u := usageOf(t, a, 11)
		if p := u.Profile; len(p) > 0 {
			if len(p) != 3 || p[0].CPUMilli != 100 || p[2].CPUMilli != 500 || !(p[0].Rate > 0) {
				t.Fatalf("profile %+v: want 3 steps from 100 to 500 milli with the rate measured", p)
			}
			t.Logf("profile %+v", p)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("no profile within 60 s")
}

func TestSimulatedJobUsage(t *testing.T) {
	a, _ := newLimitAgent(t, Config{})
	if err := a.Start(context.Background(), job.Spec{JobID: 2, GPUs: []int{0, 1}, SimRemaining: time.Minute,
		Resources: &job.Resources{CPUMilli: 6000, MemMiB: 64000}}); err != nil {
		t.Fatal(err)
	}
	u := usageOf(t, a, 2)
	if u.UsedCPUMilli <= 0 || u.UsedCPUMilli > 6000 || u.UsedMemMiB <= 0 || u.UsedMemMiB > 64000 || u.Enforced {
		t.Errorf("simulated usage %+v: want plausible use within the allocation", u)
	}
}
