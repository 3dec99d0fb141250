package integration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestPythonClient runs the Python client's tests
// (testdata/python-client/test_client.py: log in with a token from the
// environment or a password, submit, follow the output, wait, list,
// cancel, and the errors with the API's message and field) against the
// real binary, with the client as the portal serves it at
// /static/clients/gpuportal.py, identical to the repository's; then
// installs the repository's package (static/clients/pyproject.toml) with
// pip and imports it.
func TestPythonClient(t *testing.T) {
	t.Parallel() // waits on the binary and the jobs' sleeps
	python := needPython(t)
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x4x80")

	resp, err := http.Get(srv.URL + "/static/clients/gpuportal.py")
	if err != nil {
		t.Fatal(err)
	}
	served, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /static/clients/gpuportal.py: %d %v", resp.StatusCode, err)
	}
	repo, err := os.ReadFile("../static/clients/gpuportal.py")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served, repo) {
		t.Fatalf("the portal serves another gpuportal.py than static/clients/gpuportal.py")
	}
	lib := t.TempDir()
	if err := os.WriteFile(filepath.Join(lib, "gpuportal.py"), served, 0o644); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../testdata/python-client/test_client.py")
	if err != nil {
		t.Fatal(err)
	}
	alice := newAPI(t, srv.URL, "alice", "dev")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-B", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PYTHONPATH="+lib, "GPUPORTAL_URL="+srv.URL, "GPUPORTAL_TOKEN="+alice.token,
		"PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 test_client.py: %v\n%s\nportal:\n%s", err, out, srv.output())
	}
	t.Logf("python3 test_client.py:\n%s", out)

	// Installable from the repository: pip builds the package from a
	// copy of static/clients (an in-tree build would leave build/ there).
	if exec.Command(python, "-c", "import setuptools, wheel").Run() != nil || exec.Command(python, "-m", "pip", "--version").Run() != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s has no pip, setuptools and wheel to install the client with (apt-get install -y python3-pip python3-wheel)", python)
		}
		t.Skipf("%s has no pip, setuptools and wheel: the install from the repository is not tried", python)
	}
	src := t.TempDir()
	for _, f := range []string{"pyproject.toml", "gpuportal.py", "gpuportal_gate.py"} {
		b, err := os.ReadFile(filepath.Join("../static/clients", f))
		if err == nil {
			err = os.WriteFile(filepath.Join(src, f), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	target := t.TempDir()
	pip := exec.CommandContext(ctx, python, "-m", "pip", "install", "--quiet", "--no-index", "--no-build-isolation", "--no-deps",
		"--target", target, src)
	if out, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install static/clients: %v\n%s", err, out)
	}
	check := exec.CommandContext(ctx, python, "-B", "-c",
		"import gpuportal, gpuportal_gate, importlib.metadata as m; assert m.version('gpuportal') == gpuportal.__version__; print(gpuportal.__file__)")
	check.Env = append(os.Environ(), "PYTHONPATH="+target)
	got, err := check.CombinedOutput()
	if err != nil || string(bytes.TrimSpace(got)) != filepath.Join(target, "gpuportal.py") {
		t.Errorf("the installed client: %v\n%s", err, got)
	}
}
