package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// cli runs "gpuportal job ..." as a user would, in an environment of its
// own (no token or configuration of whoever runs the tests). It talks to
// the server through a proxy in the test (contractProxy), so its
// requests and the answers it gets are checked against web/openapi.json.
type cli struct {
	t      *testing.T
	env    []string
	server string // the real server, behind the proxy
}

// newCLI is a CLI whose $GPUPORTAL_SERVER is server, through the
// contract proxy ("" for none).
func newCLI(t *testing.T, server string) *cli {
	home := t.TempDir()
	proxy := ""
	if server != "" {
		proxy = contractProxy(t, server, false)
	}
	return &cli{t: t, server: server, env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"GPUPORTAL_SERVER=" + proxy,
	}}
}

// serverURL is the server the CLI is told: the contract proxy's URL.
func (c *cli) serverURL() string {
	for _, e := range c.env {
		if u, ok := strings.CutPrefix(e, "GPUPORTAL_SERVER="); ok {
			return u
		}
	}
	return ""
}

// malformed is c sending its requests malformed on purpose (a flag the
// CLI leaves to the server to refuse): only the answers are checked.
func (c *cli) malformed() *cli {
	m := *c
	m.env = append([]string{}, c.env...)
	for i, e := range m.env {
		if strings.HasPrefix(e, "GPUPORTAL_SERVER=") && c.server != "" {
			m.env[i] = "GPUPORTAL_SERVER=" + contractProxy(c.t, c.server, true)
		}
	}
	return &m
}

// run runs the binary with args and returns its output and exit code.
func (c *cli) run(extraEnv []string, args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(append([]string{}, c.env...), extraEnv...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		c.t.Fatalf("run gpuportal %v: %v", args, err)
	}
	if strings.Contains(errOut.String(), `unknown command "job"`) {
		c.t.Fatalf(`this gpuportal has no "job" command: main.go must dispatch "job" to runJob`)
	}
	return out.String(), errOut.String(), code
}

// ok runs the binary and fails the test unless it succeeds.
func (c *cli) ok(extraEnv []string, args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(extraEnv, args...)
	if code != 0 {
		c.t.Fatalf("gpuportal %s: exit code %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// fails runs the binary and checks that it fails with a message
// containing each of wants.
func (c *cli) fails(extraEnv []string, wants []string, args ...string) {
	c.t.Helper()
	out, errOut, code := c.run(extraEnv, args...)
	if code == 0 {
		c.t.Errorf("gpuportal %s succeeded; want it to fail\nstdout:\n%s", strings.Join(args, " "), out)
		return
	}
	for _, w := range wants {
		if !strings.Contains(errOut, w) {
			c.t.Errorf("gpuportal %s: stderr lacks %q:\n%s", strings.Join(args, " "), w, errOut)
		}
	}
}

// TestCLIJob drives "gpuportal job" against a real server: the token from
// its file, submitting a command and a simulated job, following output,
// showing, listing, cancelling, and the server's errors passed on.
func TestCLIJob(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--grace", "2s", "--max-retries", "0")
	c := newCLI(t, srv.URL)

	// Without a token, the command says how to get one.
	c.fails(nil, []string{"no API token", "GPUPORTAL_TOKEN", "/api/v1/tokens"}, "job", "list")

	// A token file others may read is refused; an owner-only one is used.
	token := newAPI(t, srv.URL, "alice", "dev").token
	home := strings.TrimPrefix(c.env[1], "HOME=")
	tokenFile := filepath.Join(home, ".config", "gpuportal", "token")
	if err := os.MkdirAll(filepath.Dir(tokenFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	c.fails(nil, []string{"chmod 600"}, "job", "list")
	if err := os.Chmod(tokenFile, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := c.ok(nil, "job", "list"); !strings.Contains(out, "no jobs") {
		t.Errorf("job list on an empty cluster: %q", out)
	}

	// A command job: its argv reaches the machine as given (no shell
	// splits "$GPUPORTAL_JOB_ID"; sh -c expands it on purpose).
	out := c.ok(nil, "job", "submit", "--json", "--name", "hello", "--gpus", "1", "--",
		"sh", "-c", `echo "hello from $GPUPORTAL_JOB_ID"; echo "two words"`)
	var submitted struct {
		ID      int64    `json:"id"`
		Command []string `json:"command"`
	}
	if err := json.Unmarshal([]byte(out), &submitted); err != nil || submitted.ID == 0 {
		t.Fatalf("submit --json printed %q: %v", out, err)
	}
	if len(submitted.Command) != 3 || submitted.Command[2] != `echo "hello from $GPUPORTAL_JOB_ID"; echo "two words"` {
		t.Errorf("command reached the server as %q", submitted.Command)
	}
	id := fmt.Sprint(submitted.ID)
	logs, errOut, code := c.run(nil, "job", "logs", "--follow", "--interval", "200ms", id)
	if code != 0 || !strings.Contains(logs, "hello from "+id+"\ntwo words\n") || !strings.Contains(errOut, "succeeded (exit code 0)") {
		t.Errorf("logs --follow: exit %d\nstdout:\n%s\nstderr:\n%s", code, logs, errOut)
	}
	if out := c.ok(nil, "job", "logs", "--tail-bytes", "10", id); out != "two words\n" {
		t.Errorf("logs --tail-bytes 10 = %q", out)
	}
	show := c.ok(nil, "job", "show", id)
	for _, want := range []string{"job " + id + ": hello", "succeeded", "exit code:", "history:", "queued", "running"} {
		if !strings.Contains(show, want) {
			t.Errorf("job show lacks %q:\n%s", want, show)
		}
	}
	var shown struct {
		Job     struct{ State string }
		History []struct{ State string }
	}
	if err := json.Unmarshal([]byte(c.ok(nil, "job", "show", "--json", id)), &shown); err != nil ||
		shown.Job.State != "succeeded" || len(shown.History) < 3 {
		t.Errorf("show --json = %+v (%v)", shown, err)
	}

	// A simulated job, listed by state and cancelled while it runs.
	out = c.ok(nil, "job", "submit", "--name", "long-sim", "--gpus", "2", "--sim-duration", "10m")
	m := regexp.MustCompile(`^job (\d+) submitted: long-sim, 2 GPUs for team vision`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("submit printed %q", out)
	}
	a := newAPI(t, srv.URL, "alice", "dev")
	var simID int64
	fmt.Sscan(m[1], &simID)
	a.waitState(simID, 30*time.Second, "running")
	if out := c.ok(nil, "job", "list", "--state", "running"); !strings.Contains(out, "long-sim") || strings.Contains(out, "hello") {
		t.Errorf("list --state running:\n%s", out)
	}
	if out := c.ok(nil, "job", "list", "--scope", "mine", "--limit", "1"); strings.Count(out, "\n") != 2 {
		t.Errorf("list --limit 1 printed:\n%s", out)
	}
	if out := c.ok(nil, "job", "cancel", m[1]); !strings.Contains(out, "job "+m[1]) {
		t.Errorf("cancel printed %q", out)
	}
	a.waitState(simID, 30*time.Second, "cancelled")

	// The server's refusals come through with its message.
	c.malformed().fails(nil, []string{"gpus: must be at least 1 (HTTP 400)"}, "job", "submit", "--name", "x", "--gpus", "0", "--sim-duration", "1m")
	c.fails(nil, []string{"job cancel: job " + m[1] + " has already ended (cancelled) (HTTP 409)"}, "job", "cancel", m[1])
	c.fails(nil, []string{"only admins", "(HTTP 403)"}, "job", "list", "--scope", "all")
	c.fails([]string{"GPUPORTAL_TOKEN=not-a-token"}, []string{"invalid or expired token (HTTP 401)", "/api/v1/tokens"}, "job", "list")

	// Bob, of another team, may not see alice's job: to him it does not exist.
	bob := newAPI(t, srv.URL, "bob", "dev").token
	c.fails([]string{"GPUPORTAL_TOKEN=" + bob}, []string{"no such job: " + id + " (HTTP 404)"}, "job", "show", id)
}
