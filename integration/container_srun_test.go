package integration

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	srunOnce sync.Once
	srunPath string
	srunErr  error
)

// staticSrun builds cmd/gpuportal-srun, as the Dockerfile does (no cgo),
// once for all tests, and returns its path.
func staticSrun(t *testing.T) string {
	t.Helper()
	srunOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gpuportal-srun-")
		if err != nil {
			srunErr = err
			return
		}
		srunPath = filepath.Join(dir, "gpuportal-srun")
		build := exec.Command("go", "build", "-o", srunPath, "../cmd/gpuportal-srun")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			srunErr = fmt.Errorf("build gpuportal-srun: %v\n%s", err, out)
		}
	})
	if srunErr != nil {
		t.Fatal(srunErr)
	}
	return srunPath
}

// TestSrunInContainerJob: a container job's command runs srun, as a Slurm
// script's steps do, in an image of nothing but a static busybox (no C
// library, no srun of its own): the agent mounts its static srun
// (--container-srun) at /usr/local/bin/srun, which starts the step's
// tasks with their ranks and returns a failing step's exit code. The
// agent refuses a dynamically linked binary as --container-srun, naming
// the flag.
func TestSrunInContainerJob(t *testing.T) {
	conf := needPodman(t)
	image := testImage(t, conf)
	unixUser(t, "gpt-cara")
	t.Setenv("CONTAINERS_CONF", conf)
	srun := staticSrun(t)

	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--max-retries", "0", "--allowed-images", "localhost/")
	// A dynamically linked binary (the test's own gpuportal) is refused.
	bad := exec.Command(binary, "agent", "--server", srv.URL, "--name", "gpu-bad", "--gpus", "sim:1x1x80", "--work-dir", t.TempDir(),
		"--run-as", "owner", "--container-runtime", "podman", "--container-srun", binary)
	bad.Env = append(os.Environ(), "GPUPORTAL_AGENT_TOKEN="+agentToken)
	if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "--container-srun") || !strings.Contains(string(out), "linked dynamically") {
		t.Errorf("agent --container-srun with a dynamic binary: %v\n%s; want a refusal naming the flag", err, out)
	}
	startAgent(t, srv.URL, "gpu-s1", "--run-as", "owner", "--work-dir", passableDir(t), "--container-runtime", "podman",
		"--container-srun", srun, "--gpus", "sim:1x2x80")
	waitGPUs(t, srv.URL, 2)
	cara := portalUser(t, srv.URL, data, "gpt-cara")

	script := `command -v srun
srun sh -c 'echo "step1 $SLURM_PROCID/$SLURM_NTASKS"'
srun -n 3 sh -c 'echo "step2 $SLURM_PROCID/$SLURM_NTASKS rank $RANK"' | sort
srun -n 2 sh -c 'exit 7'; echo "step3 exit $?"`
	id := submit(t, cara, map[string]any{"name": "srun-in-image", "gpus": 2, "image": image, "command": []string{"sh", "-c", script}})
	j := cara.waitState(id, 90*time.Second, "succeeded", "failed")
	out := jobLog(t, cara, id)
	if j.State != "succeeded" {
		t.Fatalf("the container job %s: %q\n%s", j.State, j.Reason, out)
	}
	// The failing step says which task ended it first (either may).
	said := regexp.MustCompile(`(?m)^gpuportal run-tasks: task [01] \(rank [01]\) ended with code 7: stopping the others\n`)
	want := "/usr/local/bin/srun\nstep1 0/1\nstep2 0/3 rank 0\nstep2 1/3 rank 1\nstep2 2/3 rank 2\nstep3 exit 7"
	if got := strings.TrimSpace(said.ReplaceAllString(out, "")); got != want || !said.MatchString(out) {
		t.Errorf("the container job printed\n%s\nwant\n%s\nand srun's word on the failing step", out, want)
	}

	// Cancelled while srun's tasks run: the container goes, and with it
	// every task (judged from the machine's processes, not the server).
	mark := fmt.Sprintf("sleep %d", 300+id) // a command line of this job's only
	id2 := submit(t, cara, map[string]any{"name": "srun-cancelled", "gpus": 1, "image": image,
		"command": []string{"sh", "-c", fmt.Sprintf(`srun -n 2 sh -c 'echo "task $SLURM_PROCID up"; %s'`, mark)}})
	cara.waitState(id2, 60*time.Second, "running")
	eventually(t, 60*time.Second, "both of srun's tasks to run", func() bool {
		return strings.Count(jobLog(t, cara, id2), " up") == 2 && len(pgrep(t, mark)) == 2
	})
	if st := cara.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", id2), nil, nil); st >= 300 {
		t.Fatalf("cancel: %d", st)
	}
	cara.waitState(id2, 30*time.Second, "cancelled")
	prefix := fmt.Sprintf("gpuportal-gpu-s1-%d-", id2)
	eventually(t, 30*time.Second, "the container and srun's tasks to be gone", func() bool {
		return len(containersOf(t, conf, prefix)) == 0 && len(pgrep(t, mark)) == 0
	})
}

// pgrep returns the PIDs of the machine's processes whose command line
// is exactly cmdline.
func pgrep(t *testing.T, cmdline string) []int {
	t.Helper()
	var pids []int
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ") == cmdline {
			pids = append(pids, pid)
		}
	}
	return pids
}
