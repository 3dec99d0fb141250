package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"go.yaml.in/yaml/v3"

	apitypes "github.com/gpuportal/gpuportal/api"
)

// testVersion is the version TestMain stamps into the binary with
// -ldflags -X, as a release build does.
const testVersion = "v0.0.0-integration"

// runStdin runs the binary with stdin and returns its output and exit
// code.
func (c *cli) runStdin(stdin string, args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = c.env
	cmd.Stdin = strings.NewReader(stdin)
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
	return out.String(), errOut.String(), code
}

// TestCLIConventions drives the CLI as kubectl and Slurm users expect to:
// login into a 0600 config file, then commands with no flags; contexts
// that switch servers; -o json equal to the API's objects; --parsable;
// exit codes that say how a job ended; --version on every side.
func TestCLIConventions(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srvA := startServer(t, "--data", t.TempDir(), "--max-retries", "0")
	srvB := startServer(t, "--data", t.TempDir(), "--max-retries", "0")
	// The CLI is told the servers' contract proxies; so is the test.
	srvA.URL, srvB.URL = contractProxy(t, srvA.URL, false), contractProxy(t, srvB.URL, false)
	c := newCLI(t, "")
	c.env = c.env[:3] // no $GPUPORTAL_SERVER: the config file says
	home := strings.TrimPrefix(c.env[1], "HOME=")
	configFile := filepath.Join(home, ".config", "gpuportal", "config.yaml")

	// Login asks for the user name and password (here on a pipe), checks
	// them and saves the server and a token owner-only.
	out, errOut, code := c.runStdin("alice\ndev\n", "login", "--server", srvA.URL)
	if code != 0 || !strings.Contains(out, "Logged in to "+srvA.URL) || !strings.Contains(out, "as alice (researcher, team vision)") {
		t.Fatalf("login: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	fi, err := os.Stat(configFile)
	if err != nil {
		t.Fatalf("login wrote no config file: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("config file mode %04o, want 0600", fi.Mode().Perm())
	}
	if dir, err := os.Stat(filepath.Dir(configFile)); err == nil && dir.Mode().Perm()&0o077 != 0 {
		t.Errorf("config folder mode %04o lets others in", dir.Mode().Perm())
	}
	if out := c.ok(nil, "job", "list"); !strings.Contains(out, "no jobs") {
		t.Errorf("job list after login, with no flags: %q", out)
	}
	if _, errOut, code := c.runStdin("wrong\n", "login", "--server", srvA.URL, "--user", "alice", "--password-stdin"); code != 1 ||
		!strings.Contains(errOut, "login: Wrong user name or password. (HTTP 401)") {
		t.Errorf("login with a wrong password: exit %d, stderr %q", code, errOut)
	}

	// A config file others may read is refused, naming the fix.
	if err := os.Chmod(configFile, 0o644); err != nil {
		t.Fatal(err)
	}
	c.fails(nil, []string{"may be read by other users", "chmod 600 " + configFile}, "job", "list")
	if err := os.Chmod(configFile, 0o600); err != nil {
		t.Fatal(err)
	}

	// A second cluster as another context, logged in with a token on
	// stdin; it becomes the current context.
	bobToken := newAPI(t, srvB.URL, "bob", "dev").token
	if _, errOut, code := c.runStdin(bobToken+"\n", "login", "--server", srvB.URL, "--context", "b", "--token-stdin"); code != 0 {
		t.Fatalf("login --token-stdin: exit %d: %s", code, errOut)
	}
	ctxs := c.ok(nil, "config", "get-contexts")
	if !regexp.MustCompile(`(?m)^\*\s+b\s+` + regexp.QuoteMeta(srvB.URL) + `\s+bob\s+yes`).MatchString(ctxs) {
		t.Errorf("get-contexts:\n%s", ctxs)
	}
	nameA := strings.TrimPrefix(srvA.URL, "http://")

	// --parsable prints only the ID; the job is on B, not on A.
	idB := strings.TrimSpace(c.ok(nil, "job", "submit", "--parsable", "--name", "on-b", "--sim-duration", "10m"))
	if !regexp.MustCompile(`^\d+$`).MatchString(idB) {
		t.Fatalf("submit --parsable printed %q, want only an ID", idB)
	}
	if out := c.ok(nil, "job", "list", "-o", "name"); out != "job/"+idB+"\n" {
		t.Errorf("job list -o name on b = %q", out)
	}
	if out := c.ok(nil, "job", "list", "--context", nameA); !strings.Contains(out, "no jobs") {
		t.Errorf("job list --context %s (server A) = %q", nameA, out)
	}
	c.ok(nil, "config", "use-context", nameA)
	if out := c.ok(nil, "config", "current-context"); out != nameA+"\n" {
		t.Errorf("current-context = %q", out)
	}
	if out := c.ok(nil, "job", "list"); !strings.Contains(out, "no jobs") {
		t.Errorf("job list after use-context %s: %q", nameA, out)
	}
	// The environment overrides the config, flags override both.
	if out := c.ok([]string{"GPUPORTAL_SERVER=" + srvB.URL, "GPUPORTAL_TOKEN=" + bobToken}, "job", "list", "-o", "name"); out != "job/"+idB+"\n" {
		t.Errorf("job list with $GPUPORTAL_SERVER of B = %q", out)
	}
	if out := c.ok([]string{"GPUPORTAL_SERVER=" + srvB.URL, "GPUPORTAL_TOKEN=" + bobToken}, "job", "list", "--context", nameA); !strings.Contains(out, "no jobs") {
		t.Errorf("job list --context A with the environment of B = %q", out)
	}

	// A failing job: logs --follow and submit --wait exit 3; the job's
	// own exit code is told on stderr.
	alice := newAPI(t, srvA.URL, "alice", "dev")
	out, errOut, code = c.run(nil, "job", "submit", "--parsable", "--wait", "--name", "boom", "--", "sh", "-c", "echo boom; exit 7")
	idA := strings.TrimSpace(out)
	if code != 3 || !regexp.MustCompile(`^\d+$`).MatchString(idA) || !strings.Contains(errOut, "job "+idA+" failed (exit code 7)") {
		t.Errorf("submit --wait of a failing job: exit %d, stdout %q, stderr %q; want 3 and only the ID", code, out, errOut)
	}
	logs, errOut, code := c.run(nil, "job", "logs", "--follow", "--interval", "200ms", idA)
	if code != 3 || logs != "boom\n" || !strings.Contains(errOut, "failed (exit code 7)") {
		t.Errorf("logs --follow of a failed job: exit %d, stdout %q, stderr %q; want 3", code, logs, errOut)
	}
	if _, errOut, code := c.run(nil, "job", "submit", "--wait", "--name", "fine", "--sim-duration", "1s"); code != 0 || !strings.Contains(errOut, "succeeded") {
		t.Errorf("submit --wait of a succeeding job: exit %d, stderr %q", code, errOut)
	}

	// -o json prints the API's objects: the same as the REST API's.
	var fromCLI, fromAPI apitypes.Job
	if err := json.Unmarshal([]byte(c.ok(nil, "job", "show", idA, "-o", "json")), &fromCLI); err != nil {
		t.Fatalf("show -o json: %v", err)
	}
	alice.do("GET", "/api/v1/jobs/"+idA, nil, &fromAPI)
	if !reflect.DeepEqual(fromCLI, fromAPI) {
		t.Errorf("show -o json = %+v\nthe API says %+v", fromCLI, fromAPI)
	}
	var listCLI, listAPI []apitypes.Job
	if err := json.Unmarshal([]byte(c.ok(nil, "job", "list", "-o", "json", "--state", "failed")), &listCLI); err != nil {
		t.Fatalf("list -o json: %v", err)
	}
	alice.do("GET", "/api/v1/jobs?state=failed", nil, &listAPI)
	if len(listCLI) != 1 || !reflect.DeepEqual(listCLI, listAPI) {
		t.Errorf("list -o json = %+v\nthe API says %+v", listCLI, listAPI)
	}
	// -o yaml holds the same fields and values.
	var fromYAML, fromJSON any
	if err := yaml.Unmarshal([]byte(c.ok(nil, "job", "show", idA, "-o", "yaml")), &fromYAML); err != nil {
		t.Fatalf("show -o yaml: %v", err)
	}
	_ = json.Unmarshal([]byte(c.ok(nil, "job", "show", idA, "-o", "json")), &fromJSON)
	if a, b := mustJSON(t, fromYAML), mustJSON(t, fromJSON); a != b {
		t.Errorf("show -o yaml reads as %s\n-o json as %s", a, b)
	}
	// --parsable lists: "|"-separated, a header, whole values.
	parsable := c.ok(nil, "job", "list", "--parsable", "--state", "failed")
	lines := strings.Split(strings.TrimSuffix(parsable, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID|NAME|USER|") || !strings.HasPrefix(lines[1], idA+"|boom|alice|vision|1|failed|") {
		t.Errorf("list --parsable:\n%s", parsable)
	}

	// Versions: stamped at build, the same on the client and the server.
	for _, args := range [][]string{{"--version"}, {"serve", "--version"}, {"agent", "--version"}} {
		if out := c.ok(nil, args...); !strings.Contains(out, testVersion+" (commit ") {
			t.Errorf("gpuportal %s = %q; want %s", strings.Join(args, " "), out, testVersion)
		}
	}
	var versions struct {
		Client, Server apitypes.Version
	}
	if err := json.Unmarshal([]byte(c.ok(nil, "version", "-o", "json")), &versions); err != nil {
		t.Fatal(err)
	}
	var served apitypes.Version
	(&api{t: t, base: srvA.URL}).do("GET", "/api/v1/version", nil, &served)
	if versions.Client.Version != testVersion || !reflect.DeepEqual(versions.Server, served) || served.Version != testVersion || served.GoVersion == "" {
		t.Errorf("version -o json = %+v; GET /api/v1/version = %+v", versions, served)
	}
	if m := metricsText(t, srvA.URL); !strings.Contains(m, `version="`+testVersion+`"`) {
		t.Errorf("gpuportal_build_info lacks version %s:\n%s", testVersion, grepLines(m, "gpuportal_build_info"))
	}
	if out := c.ok(nil, "version"); !strings.Contains(out, "Client: "+testVersion) || !strings.Contains(out, "Server: "+testVersion) || !strings.Contains(out, srvA.URL) {
		t.Errorf("version:\n%s", out)
	}

	// Logout revokes the token on the server and deletes it from the
	// file; the next command says how to log in.
	raw, err := os.ReadFile(configFile)
	if err != nil {
		t.Fatal(err)
	}
	var saved struct {
		Contexts []struct{ Name, Token string }
	}
	if err := yaml.Unmarshal(raw, &saved); err != nil {
		t.Fatal(err)
	}
	var tokenA string
	for _, cx := range saved.Contexts {
		if cx.Name == nameA {
			tokenA = cx.Token
		}
	}
	if out := c.ok(nil, "logout"); !strings.Contains(out, "revoked on "+srvA.URL) {
		t.Errorf("logout printed %q", out)
	}
	if code := (&api{t: t, base: srvA.URL, token: tokenA}).do("GET", "/api/v1/me", nil, nil); code != 401 {
		t.Errorf("the logged-out token still works: GET /api/v1/me answered %d", code)
	}
	if raw, _ := os.ReadFile(configFile); strings.Contains(string(raw), tokenA) {
		t.Error("the logged-out token is still in the config file")
	}
	c.fails(nil, []string{"no API token for " + srvA.URL, "gpuportal login --context " + nameA}, "job", "list")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCLIInShells sources the generated completion scripts in real shells
// and asks them to complete: bash and zsh on a pseudo-terminal, pressing
// TAB ("gpuportal jo" becomes "gpuportal job", "job show " the ID of the
// user's only job, asked of the server); fish through its complete -C.
// It also logs in on a terminal, where the password is not echoed.
func TestCLIInShells(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir())
	c := newCLI(t, srv.URL)
	token := newAPI(t, srv.URL, "alice", "dev").token
	c.env = append(c.env, "GPUPORTAL_TOKEN="+token)
	id := strings.TrimSpace(c.ok(nil, "job", "submit", "--parsable", "--name", "only", "--sim-duration", "10m"))
	// The shells run "gpuportal": the binary under test, whatever its
	// file is called (GPUPORTAL_TEST_BINARY may name any).
	bin := t.TempDir()
	abs, err := filepath.Abs(binary)
	if err == nil {
		err = os.Symlink(abs, filepath.Join(bin, "gpuportal"))
	}
	if err != nil {
		t.Fatal(err)
	}
	env := append(append([]string{}, c.env...), "PATH="+bin+":"+os.Getenv("PATH"), "PS1=$ ", "TERM=dumb", "INPUTRC=/dev/null")
	dir := t.TempDir()
	script := func(sh string) string {
		path := filepath.Join(dir, "gpuportal."+sh)
		if err := os.WriteFile(path, []byte(c.ok(nil, "completion", sh)), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	for _, sh := range []struct {
		name  string
		args  []string
		setup string
	}{
		// cobra's bash script needs the bash-completion package, as
		// kubectl's does.
		{"bash", []string{"--norc", "--noprofile", "-i"}, "source " + bashCompletion(t) + " && source " + script("bash")},
		{"zsh", []string{"-f", "-i"}, "autoload -Uz compinit && compinit -u && source " + script("zsh")},
	} {
		t.Run(sh.name, func(t *testing.T) {
			term := startShell(t, sh.name, env, sh.args...)
			term.send(sh.setup + " && echo sourced\n")
			term.expect("sourced")
			term.send("gpuportal jo\t")
			term.expect("gpuportal job ")
			term.send("sh\t")
			term.expect("show")
			term.send("\t")
			term.expect(id + " ")
			term.send("\n")
			term.expect("job " + id + ": only")
		})
	}

	// On a terminal, login asks for the user name, and for the password
	// without echoing it.
	t.Run("login on a terminal", func(t *testing.T) {
		term := startShell(t, "bash", env, "--norc", "--noprofile", "-i")
		term.send("gpuportal login\n")
		term.expect("User name (leave empty to paste an API token instead): ")
		term.send("alice\n")
		term.expect("Password for alice: ")
		term.send("s3cret-dev\n")
		term.expect("Wrong user name or password")
		term.send("gpuportal login --user alice\n")
		term.expect("Password for alice: ")
		term.send("dev\n")
		term.expect("Logged in to " + c.serverURL())
		if strings.Contains(term.screen.String(), "s3cret-dev") {
			t.Errorf("the password was echoed:\n%s", term.screen.String())
		}
	})

	t.Run("fish", func(t *testing.T) {
		fish := shellPath(t, "fish")
		path := script("fish")
		cmd := exec.Command(fish, "--no-config", "-c", "source "+path+`; complete -C "gpuportal jo"; complete -C "gpuportal job show "; complete -C "gpuportal job list -o y"`)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fish: %v\n%s", err, out)
		}
		for _, want := range []string{"job\tsubmit, list, show", id + "\tonly (running)", "yaml\toutput format"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("fish completes:\n%s\nwant %q", out, want)
			}
		}
	})
}

// bashCompletion finds the bash-completion package's script, or fails in
// CI (scripts/ensure-shells installs it) and skips elsewhere, saying so.
func bashCompletion(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/share/bash-completion/bash_completion", "/etc/bash_completion"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no bash-completion: the bash completion test needs it in CI (scripts/ensure-shells)")
	}
	t.Skip("no bash-completion installed (scripts/ensure-shells installs it)")
	return ""
}

// shellPath finds a shell, or fails in CI (scripts/ensure-shells installs
// them) and skips elsewhere, saying so.
func shellPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no %s: the completion tests need it in CI (scripts/ensure-shells)", name)
	}
	t.Skipf("no %s installed (scripts/ensure-shells installs it)", name)
	return ""
}

// shellTerm is an interactive shell on a pseudo-terminal.
type shellTerm struct {
	t      *testing.T
	tty    *os.File
	screen *chanBuffer
	seen   int // how much of the screen expect has read
}

// startShell starts shell name on a pseudo-terminal; it is killed when t
// ends.
func startShell(t *testing.T, name string, env []string, args ...string) *shellTerm {
	t.Helper()
	sh := exec.Command(shellPath(t, name), args...)
	sh.Env = env
	tty, err := pty.StartWithSize(sh, &pty.Winsize{Rows: 40, Cols: 200})
	if err != nil {
		t.Fatalf("start %s on a pseudo-terminal: %v", name, err)
	}
	st := &shellTerm{t: t, tty: tty, screen: &chanBuffer{}}
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(st.screen, tty); close(copied) }()
	t.Cleanup(func() {
		_ = sh.Process.Kill()
		_ = sh.Wait()
		tty.Close()
		<-copied
	})
	return st
}

func (st *shellTerm) send(s string) {
	st.t.Helper()
	if _, err := st.tty.Write([]byte(s)); err != nil {
		st.t.Fatal(err)
	}
}

// expect waits until what appears on the terminal after what was
// expected last.
func (st *shellTerm) expect(what string) {
	st.t.Helper()
	eventually(st.t, 20*time.Second, fmt.Sprintf("%q on the terminal (it shows %q)", what, st.screen.String()[st.seen:]), func() bool {
		i := strings.Index(st.screen.String()[st.seen:], what)
		if i < 0 {
			return false
		}
		st.seen += i + len(what)
		return true
	})
}

// chanBuffer is a bytes.Buffer safe for one writer and one reader.
type chanBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *chanBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *chanBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
