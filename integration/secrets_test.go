package integration

import (
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestNoSecretsInLogs runs a server on PostgreSQL with a password in its
// DSN, a development token, an agent token and a remote agent, logs in
// right and wrong, issues and uses an API token, then searches everything
// the server and the agent printed for any of those secrets.
func TestNoSecretsInLogs(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	const (
		dsnPassword  = "dsn-pass-Zq81"
		userPassword = "user-pass-Kd42x"
		wrongPass    = "wrong-pass-Vb77"
		devToken     = "dev-token-Pw93m"
	)
	// The test server trusts local connections, so any password works.
	u, err := url.Parse(modelstest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("postgres", dsnPassword)
	dsn := u.String()
	data := t.TempDir()

	admin := exec.Command(binary, "admin", "--db", dsn, "create-team", "--name", "secure")
	if out, err := admin.CombinedOutput(); err != nil {
		t.Fatalf("create team: %v\n%s", err, out)
	}
	admin = exec.Command(binary, "admin", "--db", dsn, "create-user", "--name", "carol", "--role", "researcher", "--team", "secure", "--password-stdin")
	admin.Stdin = strings.NewReader(userPassword + "\n")
	if out, err := admin.CombinedOutput(); err != nil || strings.Contains(string(out), userPassword) {
		t.Fatalf("create user: %v\n%s", err, out)
	}

	srv := startServer(t, "--data", data, "--db", dsn, "--dev-token", devToken, "--agent-token", agentToken, "--no-local-agent")
	agent := startAgent(t, srv.URL, "remote-s")
	waitGPUs(t, srv.URL, 2)

	b := newBrowser(t, srv.URL)
	if status, _, _ := b.post("/login", url.Values{"_csrf": {b.csrf("/login")}, "username": {"carol"}, "password": {wrongPass}}); status != http.StatusUnauthorized {
		t.Errorf("wrong password: status %d", status)
	}
	b.login("carol", userPassword)
	a := newAPI(t, srv.URL, "carol", userPassword)
	var j jobView
	if st := a.do("POST", "/api/v1/jobs", map[string]any{"name": "s", "gpus": 1, "command": []string{"true"}}, &j); st != http.StatusCreated {
		t.Fatalf("submit: %d", st)
	}
	a.waitState(j.ID, 30*time.Second, "succeeded", "failed")
	dev := &api{t: t, base: srv.URL, token: devToken}
	if st := dev.do("GET", "/api/v1/jobs?scope=all", nil, nil); st != http.StatusOK {
		t.Errorf("dev token: status %d", st)
	}
	bad := &api{t: t, base: srv.URL, token: "not-" + a.token}
	bad.do("GET", "/api/v1/jobs", nil, nil)

	srv.stop()
	agent.stop()
	logs := srv.output() + agent.output()
	for name, secret := range map[string]string{
		"DSN password": dsnPassword, "user password": userPassword, "wrong password": wrongPass,
		"development token": devToken, "agent token": agentToken, "API token": a.token,
	} {
		if strings.Contains(logs, secret) {
			t.Errorf("the logs contain the %s", name)
		}
	}
	if !strings.Contains(logs, "login failed") {
		t.Errorf("the failed login is not logged at all")
	}
}
