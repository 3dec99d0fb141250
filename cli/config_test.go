package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
)

// writeTestConfig saves cfg as the config file under dir.
func writeTestConfig(t *testing.T, dir string, cfg *cliConfig) string {
	t.Helper()
	path := filepath.Join(dir, "gpuportal", "config.yaml")
	if err := saveConfig(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTarget checks which server and token a command uses: flags, then
// the environment, then the config file; a context's token never goes
// to another server.
func TestTarget(t *testing.T) {
	const a, b, x = "https://a.example.com", "https://b.example.com", "https://x.example.com"
	cfg := &cliConfig{CurrentContext: "a", Contexts: []cliContext{
		{Name: "a", Server: a, User: "alice", Token: "tok-a"},
		{Name: "b", Server: b, User: "alice", Token: "tok-b"},
		{Name: "out", Server: x},
	}}
	tests := []struct {
		name              string
		env               map[string]string
		server, context   string
		noConfig          bool
		wantServer, token string
		wantErr           []string
	}{
		{name: "the current context", wantServer: a, token: "tok-a"},
		{name: "the environment over the config", env: map[string]string{jobServerEnv: b, jobTokenEnv: "tok-env"}, wantServer: b, token: "tok-env"},
		{name: "env server of the current context: its token", env: map[string]string{jobServerEnv: a + "/"}, wantServer: a, token: "tok-a"},
		{name: "env server of another: the current context's token stays home", env: map[string]string{jobServerEnv: b},
			wantErr: []string{"no API token for " + b, "gpuportal login --server " + b}},
		{name: "--context over the environment", env: map[string]string{jobServerEnv: x, jobTokenEnv: "tok-env"}, context: "b", wantServer: b, token: "tok-b"},
		{name: "--server over --context: the context's token stays home", env: map[string]string{jobTokenEnv: "tok-env"}, server: x, context: "a", wantServer: x, token: "tok-env"},
		{name: "--server of the current context", server: a, wantServer: a, token: "tok-a"},
		{name: "unknown --context names the saved ones", context: "nope", wantErr: []string{`no context "nope"`, "a, b, out"}},
		{name: "a logged-out context", context: "out", wantErr: []string{`context "out" is logged out`, "gpuportal login --context out"}},
		{name: "no config, no token", noConfig: true, wantErr: []string{"no API token for " + jobDefaultServer, "gpuportal login", jobTokenEnv}},
		{name: "no config, the environment", noConfig: true, env: map[string]string{jobTokenEnv: "tok-env"}, wantServer: jobDefaultServer, token: "tok-env"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if !tc.noConfig {
				writeTestConfig(t, dir, cfg)
			}
			c := jobCmd{getenv: func(k string) string { return tc.env[k] }, configDir: func() (string, error) { return dir, nil }}
			got, err := c.target(&jobFlags{server: tc.server, context: tc.context})
			if len(tc.wantErr) > 0 {
				for _, w := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("err = %v; want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.server.String() != tc.wantServer || got.token != tc.token {
				t.Errorf("target = %s with %q; want %s with %q", got.server, got.token, tc.wantServer, tc.token)
			}
		})
	}
}

// TestConfigFileMode: the config file is written owner-only, and one that
// others may read is refused before any token is sent.
func TestConfigFileMode(t *testing.T) {
	dir := t.TempDir()
	path := writeTestConfig(t, dir, &cliConfig{CurrentContext: "a", Contexts: []cliContext{{Name: "a", Server: "https://a.example.com", Token: "tok"}}})
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("config file mode %04o, want 0600", fi.Mode().Perm())
	}
	c := jobCmd{getenv: func(string) string { return "" }, configDir: func() (string, error) { return dir, nil }}
	for _, mode := range []os.FileMode{0o640, 0o604} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := c.target(&jobFlags{})
		if err == nil || !strings.Contains(err.Error(), "chmod 600") || !strings.Contains(err.Error(), "may be read by other users") {
			t.Errorf("mode %04o: err = %v; want the file refused", mode, err)
		}
	}
}

// TestConfigCommands switches, lists and deletes contexts.
func TestConfigCommands(t *testing.T) {
	dir := t.TempDir()
	writeTestConfig(t, dir, &cliConfig{CurrentContext: "a", Contexts: []cliContext{
		{Name: "a", Server: "https://a.example.com", User: "alice", Token: "tok"},
		{Name: "b", Server: "https://b.example.com", User: "bob"},
	}})
	steps := []struct {
		args    []string
		wantOut []string
		wantErr string
	}{
		{args: []string{"get-contexts"}, wantOut: []string{"CURRENT  NAME  SERVER                 USER   LOGGED IN", "*        a     https://a.example.com  alice  yes", "b     https://b.example.com  bob    no"}},
		{args: []string{"use-context", "b"}, wantOut: []string{`Switched to context "b" (https://b.example.com).`}},
		{args: []string{"current-context"}, wantOut: []string{"b\n"}},
		{args: []string{"get-contexts", "-o", "name"}, wantOut: []string{"a\nb\n"}},
		{args: []string{"use-context", "c"}, wantErr: `config use-context: no context "c": the saved ones are a, b`},
		{args: []string{"use-context"}, wantErr: "want one context name"},
		{args: []string{"delete-context", "b"}, wantOut: []string{`Deleted context "b".`}},
		{args: []string{"current-context"}, wantErr: "no current context"},
		{args: []string{"frob"}, wantErr: `config: unknown command "frob"`},
	}
	for _, st := range steps {
		out, err := runConfigForTest(dir, st.args...)
		if st.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), st.wantErr) {
				t.Errorf("config %v: err = %v; want %q", st.args, err, st.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("config %v: %v", st.args, err)
		}
		for _, w := range st.wantOut {
			if !strings.Contains(out, w) {
				t.Errorf("config %v printed %q; want %q", st.args, out, w)
			}
		}
	}
}

// runConfigForTest runs gpuportal config with dir as the config folder.
func runConfigForTest(dir string, args ...string) (string, error) {
	var out strings.Builder
	c := jobCmd{getenv: func(string) string { return "" }, configDir: func() (string, error) { return dir, nil },
		now: time.Now, http: http.DefaultClient, stdout: &out, stderr: &out}
	err := c.execute(context.Background(), append([]string{"config"}, args...))
	return out.String(), err
}

// TestLoginWrongPassword: a refused password says to check the name and
// password, and how an account of single sign-on logs in; not how to get
// a token with curl, which is what failed.
func TestLoginWrongPassword(t *testing.T) {
	fake := &fakeAPI{routes: map[string]fakeAnswer{
		"GET /api/v1/version": {200, `{"version":"v9.9.9","revision":"","modified":false,"commit_time":null,"go_version":"go1.26.0"}`},
		"POST /api/v1/tokens": {401, `{"error":"Wrong user name or password."}`},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	var out, errOut strings.Builder
	dir := t.TempDir()
	c := jobCmd{getenv: func(string) string { return "" }, configDir: func() (string, error) { return dir, nil },
		now: time.Now, http: srv.Client(), stdin: strings.NewReader("wrong\n"), stdout: &out, stderr: &errOut}
	err := c.execute(context.Background(), []string{"login", srv.URL, "--user", "alice", "--password-stdin"})
	if err == nil || !strings.Contains(err.Error(), "Check the user name and password") ||
		!strings.Contains(err.Error(), "gpuportal login "+srv.URL+" --token-stdin") || strings.Contains(err.Error(), "curl") {
		t.Errorf("err = %v; want the name and password to check, and no curl", err)
	}
}

// TestLogin logs in with a password and with a token read from standard
// input against a fake server, and saves the context owner-only.
func TestLogin(t *testing.T) {
	fake := &fakeAPI{routes: map[string]fakeAnswer{
		"GET /api/v1/version":           {200, `{"version":"v9.9.9","revision":"","modified":false,"commit_time":null,"go_version":"go1.26.0"}`},
		"POST /api/v1/tokens":           {201, `{"token":"tok-new"}`},
		"GET /api/v1/me":                {200, `{"name":"alice","role":"researcher","team":"vision"}`},
		"DELETE /api/v1/tokens/current": {204, ""},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	var out, errOut strings.Builder
	c := jobCmd{getenv: func(string) string { return "" }, configDir: func() (string, error) { return dir, nil },
		now: time.Now, http: srv.Client(), stdin: strings.NewReader(srv.URL + "\nalice\nsecret\n"), stdout: &out, stderr: &errOut}
	if err := c.execute(context.Background(), []string{"login"}); err != nil {
		t.Fatalf("login: %v\n%s", err, errOut.String())
	}
	got := fake.requests()
	if len(got) != 3 || got[1].path != "/api/v1/tokens" || !strings.HasPrefix(got[1].auth, "Basic ") || got[2].auth != "Bearer tok-new" {
		t.Errorf("requests %+v: want version, a token for the password, then /me with it", got)
	}
	cfg, path, err := c.loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	cx := cfg.current()
	if cx == nil || cx.Server != srv.URL || cx.Token != "tok-new" || cx.User != "alice" {
		t.Fatalf("saved %+v", cfg)
	}
	if !strings.Contains(out.String(), "Logged in to "+srv.URL+" (gpuportal v9.9.9) as alice") || !strings.Contains(out.String(), path) {
		t.Errorf("login printed %q", out.String())
	}
	// Again with a token on stdin, as another context.
	c.stdin = strings.NewReader("tok-pasted\n")
	if err := c.execute(context.Background(), []string{"login", "--server", srv.URL, "--context", "second", "--token-stdin"}); err != nil {
		t.Fatal(err)
	}
	cfg, _, _ = c.loadConfig()
	if cfg.CurrentContext != "second" || cfg.context("second").Token != "tok-pasted" || len(cfg.Contexts) != 2 {
		t.Errorf("after the second login: %+v", cfg)
	}
	if err := c.execute(context.Background(), []string{"logout"}); err != nil {
		t.Fatal(err)
	}
	if last := fake.requests()[len(fake.requests())-1]; last.method != http.MethodDelete || last.path != "/api/v1/tokens/current" || last.auth != "Bearer tok-pasted" {
		t.Errorf("logout sent %+v; want the token to revoke itself", last)
	}
	cfg, _, _ = c.loadConfig()
	if cfg.context("second").Token != "" || cfg.context(cfg.Contexts[0].Name).Token != "tok-new" {
		t.Errorf("logout deleted the wrong token: %+v", cfg)
	}
	// Bad input names the flag; a server that is not gpuportal is told.
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"--password-stdin", "--server", srv.URL}, "--password-stdin needs --user"},
		{[]string{"--token-stdin", "--user", "alice"}, "--token-stdin logs in with a token"},
		{[]string{"--server", "gpus.example.com"}, `--server "gpus.example.com"`},
		{[]string{"--server", srv.URL + "/nothing"}, "does not answer as a gpuportal server"},
	} {
		c.stdin = strings.NewReader("")
		if err := c.execute(context.Background(), append([]string{"login"}, tc.args...)); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("login %v: err = %v; want %q", tc.args, err, tc.wantErr)
		}
	}
}

func TestLoggedInAs(t *testing.T) {
	for _, tc := range []struct {
		me   api.Me
		want string
	}{
		{api.Me{Name: "alice", Role: "researcher", Team: "vision"}, "alice (researcher, team vision)"},
		{api.Me{Name: "admin", Role: "admin"}, "admin (admin, no team)"}, // was "(admin, team )"
	} {
		if got := loggedInAs(tc.me); got != tc.want {
			t.Errorf("loggedInAs(%+v) = %q, want %q", tc.me, got, tc.want)
		}
	}
}
