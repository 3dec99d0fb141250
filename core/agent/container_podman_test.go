package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/internal/testpodman"
)

// TestContainerSessionReachable: a web session in a container on a
// network of its own listens on the container's interfaces, and the
// agent still reaches it on the machine's loopback (DialSession, as the
// portal's proxy and tunnels do), through its port published there; the
// port is not reachable on the machine's other addresses. On the
// machine's network it is reached as a command's is.
func TestContainerSessionReachable(t *testing.T) {
	conf := testpodman.Need(t)
	image := testpodman.Image(t, conf)
	t.Setenv("CONTAINERS_CONF", conf)
	for i, network := range []ContainerNetwork{NetworkPrivate, NetworkHost} {
		t.Run(network.String(), func(t *testing.T) {
			exits := make(chan job.Exit, 1)
			a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 1, 8192), WorkDir: t.TempDir(), Grace: time.Second,
				Containers: &ContainerConfig{Runtime: "podman", Network: network}}, exits)
			if err != nil {
				t.Fatal(err)
			}
			// Containers are named after the machine, job and run: a job
			// ID of this process's own, for two test runs at once.
			ref := job.RunRef{Job: int64(os.Getpid())*10 + int64(i), Run: 1}
			err = a.Start(context.Background(), job.Spec{JobID: ref.Job, Run: ref.Run, GPUs: []int{0}, Image: image,
				Session: &job.Session{Type: job.SessionWeb, Token: "tok"},
				Command: []string{"sh", "-c", `echo "served on $PORT" > index.html && exec httpd -f -p "$PORT"`}})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = a.Stop(context.Background(), ref)
				select {
				case <-exits:
				case <-time.After(30 * time.Second):
					t.Error("the session did not end within 30 s of its stop")
				}
			}()
			var body string
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				if body, err = getThrough(a, ref); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the session is not reachable through the agent: %v\n%s", err, readLog(t, a, ref.Job))
				}
			}
			a.mu.Lock()
			port := a.runs[ref.Job].sessionPort
			a.mu.Unlock()
			if want := fmt.Sprintf("served on %d", port); strings.TrimSpace(body) != want {
				t.Errorf("the session answered %q, want %q", body, want)
			}
			if network == NetworkHost {
				return
			}
			for _, ip := range machineAddrs(t) {
				c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, fmt.Sprint(port)), 2*time.Second)
				if err == nil {
					c.Close()
					t.Errorf("the session's port %d is reachable on %s, not only on the loopback", port, ip)
				}
			}
		})
	}
}

// getThrough fetches / of session ref through the agent's DialSession.
func getThrough(a *Local, ref job.RunRef) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := a.DialSession(ctx, ref)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status)
	}
	return string(b), nil
}

// machineAddrs are this machine's IPv4 addresses other than loopback.
func machineAddrs(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	return out
}
