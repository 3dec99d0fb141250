package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/internal/testpodman"
)

// Container jobs (issue 18): a job that names an image runs in a Podman
// container on the agent's machine, as its owner's Unix account, with its
// GPUs, folder and environment; stopping it stops the container; images
// outside the server's allowed prefixes are refused at submit.

// needPodman fails under CI, and skips elsewhere, unless Podman and a
// static busybox are here (scripts/ensure-podman installs them). It
// returns CONTAINERS_CONF for the agent: testdata/podman/containers.conf.
func needPodman(t *testing.T) string {
	t.Helper()
	needRootAccounts(t)
	return testpodman.Need(t)
}

// testImage makes sure the local image the container tests run exists,
// and returns its name (testpodman.Image: the machine's static busybox,
// imported, never pulled).
func testImage(t *testing.T, conf string) string {
	t.Helper()
	return testpodman.Image(t, conf)
}

// podman runs podman with the tests' configuration.
func podman(t *testing.T, conf string, args ...string) error {
	t.Helper()
	_, err := testpodman.Podman(t, conf, args...)
	return err
}

func podmanOut(t *testing.T, conf string, args ...string) (string, error) {
	t.Helper()
	return testpodman.Podman(t, conf, args...)
}

// containersOf lists the containers, running or not, whose name starts
// with prefix.
func containersOf(t *testing.T, conf, prefix string) []string {
	t.Helper()
	out, err := podmanOut(t, conf, "ps", "--all", "--filter", "name="+prefix, "--format", "{{.Names}}")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

// TestContainerJob: alice's job names a local image; the agent (run as
// root, --run-as owner, --container-runtime podman) runs it in a
// container as her Unix account, with CUDA_VISIBLE_DEVICES naming its
// GPU, the job's variables and a --pass-env variable, in its folder.
// Cancelled, it gets SIGTERM and its container is gone. A container job
// preempted by a newer one saves its checkpoint on SIGTERM and resumes
// from it in a new container. The agent killed
// with SIGKILL while a container job runs leaves no container behind (its
// watchdog stops it). An image outside --allowed-images is refused at
// submit, naming the field.
func TestContainerJob(t *testing.T) {
	conf := needPodman(t)
	image := testImage(t, conf)
	unixUser(t, "gpt-cara")
	t.Setenv("CONTAINERS_CONF", conf)
	t.Setenv("GPT_LAB_SECRET", "s3cret-value")

	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--max-retries", "0", "--allowed-images", "localhost/,registry.lab/", "--thresholds", "3")
	work := passableDir(t)
	ag := startAgent(t, srv.URL, "gpu-c1", "--run-as", "owner", "--work-dir", work, "--container-runtime", "podman",
		"--pass-env", "GPT_LAB_SECRET", "--grace", "3s")
	waitGPUs(t, srv.URL, 2)
	cara := portalUser(t, srv.URL, data, "gpt-cara")

	// Refused at submit: a registry not allowed, and no command to run.
	for _, tc := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"name": "pulled", "gpus": 1, "image": "docker.io/library/busybox:1", "command": []string{"true"}}, "image: "},
		{map[string]any{"name": "bad", "gpus": 1, "image": "-v /:/host", "command": []string{"true"}}, "image: "},
		{map[string]any{"name": "sim", "gpus": 1, "image": image, "sim": map[string]any{"duration_s": 5}}, "image: "},
	} {
		var e struct {
			Error string `json:"error"`
		}
		st := cara.do(http.MethodPost, "/api/v1/jobs", tc.body, &e)
		if st != http.StatusBadRequest || !strings.HasPrefix(e.Error, tc.want) {
			t.Errorf("submit %v: %d %q; want 400 naming the image", tc.body["image"], st, e.Error)
		}
	}

	script := `id -un; echo "gpus=$CUDA_VISIBLE_DEVICES"; echo "job=$GPUPORTAL_JOB_ID"; echo "secret=$GPT_LAB_SECRET"; echo "lr=$LEARNING_RATE"; pwd
trap 'echo "got SIGTERM"; exit 143' TERM
echo ready
while true; do sleep 0.2; done`
	id := submit(t, cara, map[string]any{"name": "in-image", "gpus": 1, "image": image, "command": []string{"sh", "-c", script},
		"env": map[string]string{"LEARNING_RATE": "0.1"}, "workdir": "checkpoint"})
	if j := cara.job(id); j.Image != image {
		t.Errorf("the job's image is %q, want %q", j.Image, image)
	}
	j := cara.waitState(id, 60*time.Second, "running", "failed")
	if j.State != "running" {
		t.Fatalf("the container job %s: %q\n%s", j.State, j.Reason, jobLog(t, cara, id))
	}
	var out string
	eventually(t, 60*time.Second, "the container job to print its identity", func() bool {
		out = jobLog(t, cara, id)
		return strings.Contains(out, "ready")
	})
	t.Logf("the container job printed:\n%s", out)
	gpu := strings.TrimPrefix(j.Placement[0], "gpu-c1:")
	want := fmt.Sprintf("gpt-cara\ngpus=%s\njob=%d\nsecret=s3cret-value\nlr=0.1\n%s\nready", gpu, id, filepath.Join(work, "jobs", fmt.Sprint(id), "checkpoint"))
	if strings.TrimSpace(out) != want {
		t.Errorf("the container job printed\n%s\nwant\n%s", out, want)
	}
	// Its CPU and memory use are measured, and where the agent's cgroups
	// work, its allocation is enforced on the container's cgroup (made
	// inside the job's).
	cgroups := strings.Contains(ag.output(), "cgroups enforce CPU and memory allocations")
	var alloc struct {
		Resources *struct {
			Allocations []struct {
				Enforced   bool   `json:"enforced"`
				Note       string `json:"note"`
				UsedMemMiB *int64 `json:"used_mem_mib"`
			} `json:"allocations"`
		} `json:"resources"`
	}
	eventually(t, 30*time.Second, "the container job's usage", func() bool {
		cara.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &alloc)
		return alloc.Resources != nil && len(alloc.Resources.Allocations) == 1 && alloc.Resources.Allocations[0].UsedMemMiB != nil
	})
	t.Logf("the container job's allocation: %+v (cgroups work: %v)", alloc.Resources.Allocations[0], cgroups)
	if a := alloc.Resources.Allocations[0]; a.Enforced != cgroups {
		t.Errorf("the container job's allocation enforced: %v (%q); the agent's cgroups work: %v", a.Enforced, a.Note, cgroups)
	}
	prefix := fmt.Sprintf("gpuportal-gpu-c1-%d-", id)
	if names := containersOf(t, conf, prefix); len(names) != 1 {
		t.Errorf("containers of the running job: %v, want one", names)
	}
	// The secret passed with --pass-env never shows on a command line.
	if ps, err := exec.Command("ps", "-eo", "args").Output(); err == nil && bytes.Contains(ps, []byte("s3cret-value")) {
		t.Error("a --pass-env value shows in ps")
	}

	if st := cara.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", id), nil, nil); st >= 300 {
		t.Fatalf("cancel: %d", st)
	}
	cara.waitState(id, 30*time.Second, "cancelled")
	eventually(t, 30*time.Second, "the container to be gone", func() bool { return len(containersOf(t, conf, prefix)) == 0 })
	if out := jobLog(t, cara, id); !strings.Contains(out, "got SIGTERM") {
		t.Errorf("the cancelled container job did not get SIGTERM:\n%s", out)
	}

	// A container job of both GPUs counts steps into its checkpoint
	// folder; past 3 GPU-seconds it is demoted, and a newer job preempts
	// it: its container gets SIGTERM, saves and goes; it runs again in a
	// new container from where it stopped.
	counter := `f="$GPUPORTAL_CHECKPOINT_DIR/step"; i=$(cat "$f" 2>/dev/null || echo 0)
echo "start at step $i resume=${GPUPORTAL_RESUME:-no} from=${GPUPORTAL_RESUME_RUN:-none}"
trap 'echo "$i" > "$f"; echo "saved at step $i"; exit 143' TERM
while [ "$i" -lt 24 ]; do sleep 0.5 & wait $!; i=$((i+1)); echo "$i" > "$f"; echo "reached $i"; done
echo "done at step $i"`
	long := submit(t, cara, map[string]any{"name": "counter", "gpus": 2, "image": image, "command": []string{"sh", "-c", counter}})
	cara.waitState(long, 60*time.Second, "running")
	eventually(t, 30*time.Second, "the counter to start", func() bool {
		return strings.Contains(jobLog(t, cara, long), "start at step 0 resume=no from=none")
	})
	// The server counts GPU-seconds from the run's start, before the
	// container is up: on a loaded machine the demotion can come before
	// the first step. Preempt it only once it has counted, so that the
	// second container has a step to resume from.
	eventually(t, 60*time.Second, "the counter to reach step 2", func() bool {
		return strings.Contains(jobLog(t, cara, long), "reached 2\n")
	})
	cara.waitQueue(long, 30*time.Second, 1) // past 3 GPU-seconds: demoted
	short := submit(t, cara, map[string]any{"name": "short", "gpus": 2, "sim": map[string]any{"duration_s": 1}})
	cara.waitState(short, 30*time.Second, "succeeded")
	if j := cara.waitState(long, 60*time.Second, "succeeded", "failed"); j.State != "succeeded" || j.Preemptions != 1 {
		t.Errorf("the preempted container job ended %s after %d preemptions, want succeeded after 1:\n%s", j.State, j.Preemptions, jobLog(t, cara, long))
	}
	clog := jobLog(t, cara, long)
	t.Logf("the preempted container job printed:\n%s", clog)
	if strings.Count(clog, "start at step 0") != 1 || !strings.Contains(clog, "saved at step") || !strings.Contains(clog, "done at step 24") {
		t.Errorf("the container job did not resume from its checkpoint:\n%s", clog)
	}
	// Its second container was told to resume, as a command is (issue 32).
	if !strings.Contains(clog, "gpuportal: run 2 resumes from the checkpoint run 1 wrote at ") || !strings.Contains(clog, "resume=1 from=1\n") {
		t.Errorf("the resumed container job was not given GPUPORTAL_RESUME=1 and GPUPORTAL_RESUME_RUN=1:\n%s", clog)
	}
	if names := containersOf(t, conf, fmt.Sprintf("gpuportal-gpu-c1-%d-", long)); len(names) != 0 {
		t.Errorf("containers of the finished job: %v", names)
	}

	// The agent dies while a container job runs: its watchdog stops the
	// container. This one comes from the CLI, which names the flag of a
	// refused image.
	c := newCLI(t, srv.URL)
	tok := []string{"GPUPORTAL_TOKEN=" + cara.token}
	c.fails(tok, []string{`image: "docker.io/library/busybox" is not allowed here`, "Fix --image."},
		"job", "submit", "--name", "x", "--image", "docker.io/library/busybox", "--", "true")
	c.fails(tok, []string{"--image needs the command"}, "job", "submit", "--name", "x", "--image", image, "--sim-duration", "1m")
	out2 := strings.TrimSpace(c.ok(tok, "job", "submit", "--parsable", "--name", "orphan", "--image", image, "--", "sh", "-c", "echo ready; while true; do sleep 0.2; done"))
	id2, err := strconv.ParseInt(out2, 10, 64)
	if err != nil {
		t.Fatalf("submit --parsable printed %q", out2)
	}
	if show := c.ok(tok, "job", "show", out2); !strings.Contains(show, image) {
		t.Errorf("job show does not name the image:\n%s", show)
	}
	cara.waitState(id2, 60*time.Second, "running")
	prefix2 := fmt.Sprintf("gpuportal-gpu-c1-%d-", id2)
	eventually(t, 60*time.Second, "the second container job to run", func() bool {
		return strings.Contains(jobLog(t, cara, id2), "ready")
	})
	ag.kill()
	killed := time.Now()
	eventually(t, 30*time.Second, "the dead agent's container to be gone", func() bool { return len(containersOf(t, conf, prefix2)) == 0 })
	t.Logf("the dead agent's container was gone %v after it died", time.Since(killed).Round(100*time.Millisecond))
}
