package hub

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/job"
)

// TestTunnelToASession: a web session's server on the agent's loopback
// port is reached through DialSession (the server sends Dial, the agent
// connects back); another run, or no session, is refused; the tunnel
// endpoint wants the protocol and a token it gave.
func TestTunnelToASession(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no python3 to serve a web app: scripts/ensure-torch installs it")
		}
		t.Skip("no python3 to serve a web app")
	}
	_, srv, reg := startHub(t, false)
	startClient(t, srv.URL, nil, "gpu-t")
	n := waitNode(t, reg, "gpu-t")
	ctx := context.Background()
	spec := job.Spec{JobID: 9, Run: 2, GPUs: []int{0},
		Command: []string{"sh", "-c", `exec "$0" -m http.server --bind 127.0.0.1 "$PORT"`, py},
		Session: &job.Session{Type: job.SessionWeb, BaseURL: "/sessions/9/s/", Token: "t"}}
	if err := n.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	dialer := n.(*remoteNode)
	var status string
	waitUntil(t, "the session to answer through the tunnel", func() bool {
		c, err := dialer.DialSession(ctx, job.RunRef{Job: 9, Run: 2})
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("GET / HTTP/1.0\r\nHost: x\r\n\r\n")); err != nil {
			return false
		}
		status, _ = bufio.NewReader(c).ReadString('\n')
		return strings.Contains(status, " 200 ")
	})
	if _, err := dialer.DialSession(ctx, job.RunRef{Job: 9, Run: 1}); err == nil || !strings.Contains(err.Error(), agent.ErrNoSession.Error()) {
		t.Errorf("dial another run: %v, want %v", err, agent.ErrNoSession)
	}
	if _, err := dialer.DialSession(ctx, job.RunRef{Job: 10, Run: 1}); err == nil {
		t.Error("dial a job that is not running: no error")
	}
	for _, c := range []struct {
		name, upgrade, token string
		want                 int
	}{
		{"no upgrade", "", "x", http.StatusBadRequest},
		{"no token", wire.TunnelProtocol, "", http.StatusUnauthorized},
		{"a token never given", wire.TunnelProtocol, "forged", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+wire.TunnelPath, nil)
		if c.upgrade != "" {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", c.upgrade)
		}
		if c.token != "" {
			req.Header.Set(wire.TunnelTokenHeader, c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
	if err := n.Stop(ctx, job.RunRef{Job: 9, Run: 2}); err != nil {
		t.Fatal(err)
	}
	nextExit(t, reg)
}
