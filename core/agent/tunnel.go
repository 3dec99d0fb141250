package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/job"
)

// tunnelURL turns the agent endpoint a session connected to into the
// server's tunnel endpoint (wire.TunnelPath).
func tunnelURL(agentEndpoint string) (string, error) {
	u, err := url.Parse(agentEndpoint)
	if err != nil {
		return "", fmt.Errorf("tunnel URL: %w", err)
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	u.Path = strings.TrimSuffix(u.Path, wire.Path) + wire.TunnelPath
	return u.String(), nil
}

// dial answers the server's Dial: it connects to the session's loopback
// port (or to the job's files, served as its account: files.go), opens a tunnel connection back to the server with the Dial's
// token, and copies bytes both ways until either side closes. The Ack
// follows the tunnel's opening, or says why there is none.
func (s *session) dial(ctx context.Context, d *wire.Dial) error {
	n := s.c.nodes[d.Node]
	if n == nil {
		return fmt.Errorf("no node %q on this agent", d.Node)
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var local net.Conn
	var err error
	if d.Files != nil {
		local, err = n.DialFiles(dctx, d.JobID, d.Files.Account)
	} else {
		local, err = n.DialSession(dctx, job.RunRef{Job: d.JobID, Run: d.Run})
	}
	if err != nil {
		return err
	}
	remote, err := s.openTunnel(dctx, d.Token)
	if err != nil {
		local.Close()
		return err
	}
	go pipe(local, remote)
	return nil
}

// openTunnel connects to the server's tunnel endpoint and switches the
// connection to the tunnel protocol.
func (s *session) openTunnel(ctx context.Context, token string) (io.ReadWriteCloser, error) {
	tu, err := tunnelURL(s.url)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tu, nil)
	if err != nil {
		return nil, fmt.Errorf("open tunnel: %w", err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", wire.TunnelProtocol)
	req.Header.Set(wire.TunnelTokenHeader, token)
	resp, err := s.c.tunnelClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("open tunnel: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("open tunnel: server answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("open tunnel: the connection cannot be written")
	}
	return rwc, nil
}

// newTunnelClient is the HTTP client tunnels open with: its own
// connections, never reused (each tunnel keeps its connection).
func newTunnelClient(cfg ClientConfig) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment, TLSClientConfig: cfg.TLS,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext, DisableKeepAlives: true,
		ForceAttemptHTTP2: false,
	}}
}

// pipe copies a and b into each other until either direction ends, then
// closes both: the tunnel and the session's connection end together.
func pipe(a, b io.ReadWriteCloser) {
	var once sync.Once
	closeBoth := func() { once.Do(func() { a.Close(); b.Close() }) }
	go func() { _, _ = io.Copy(a, b); closeBoth() }()
	_, _ = io.Copy(b, a)
	closeBoth()
}
