package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJobEnvironmentIsMinimal: secrets in the environment of the server
// (and so of its built-in agents) never reach a job; variables the
// operator names with --pass-env do.
func TestJobEnvironmentIsMinimal(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-in-the-agents-env")
	t.Setenv("PGPASSWORD", "pg-secret-in-the-agents-env")
	t.Setenv("NCCL_SOCKET_IFNAME", "eth-passed")
	srv := startServer(t, "--data", t.TempDir(), "--pass-env", "NCCL_SOCKET_IFNAME")
	a := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, a, map[string]any{"name": "env", "gpus": 1, "command": []string{"env"}})
	a.waitState(id, 30*time.Second, "succeeded")
	out := jobLog(t, a, id)
	for _, secret := range []string{"aws-secret-in-the-agents-env", "pg-secret-in-the-agents-env", "GPUPORTAL_AGENT_TOKEN"} {
		if strings.Contains(out, secret) {
			t.Errorf("the job saw %s:\n%s", secret, out)
		}
	}
	for _, want := range []string{"NCCL_SOCKET_IFNAME=eth-passed", "PATH=", "CUDA_VISIBLE_DEVICES=0", "GPUPORTAL_RUN=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the job's environment lacks %s:\n%s", want, out)
		}
	}
}

// TestDevServerNeverRunsJobsAsRoot: serve --dev started as root without
// --run-as runs command jobs as nobody, and says so.
func TestDevServerNeverRunsJobsAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs as root, and this test checks what a server run as root does")
		}
		t.Skip("needs root: it checks what a server run as root does")
	}
	data := t.TempDir()
	for d := data; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755) // nobody passes through the test's folders
	}
	srv := startServer(t, "--data", data, "--run-as=")
	if !strings.Contains(srv.output(), "the built-in agents run command jobs as nobody") {
		t.Errorf("the server does not say who runs jobs:\n%s", srv.output())
	}
	a := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, a, map[string]any{"name": "whoami", "gpus": 1, "command": []string{"sh", "-c", "id -un; touch $GPUPORTAL_CHECKPOINT_DIR/ok"}})
	j := a.waitState(id, 30*time.Second, "succeeded", "failed")
	out := jobLog(t, a, id)
	if j.State != "succeeded" || strings.TrimSpace(out) != "nobody" {
		t.Errorf("job %s, output %q; want it run as nobody, able to write its checkpoint folder", j.State, out)
	}
}
