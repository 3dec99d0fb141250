package hub

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/jobfiles"
	"github.com/gpuportal/gpuportal/core/jobfiles/filehttp"
)

// Tunnels to interactive sessions (wire/session.go): the server asks an
// agent to dial a session's loopback port and the agent connects back with
// the session's bytes. The server never dials a machine.

// DialTimeout bounds how long a tunnel takes to come: the agent's answer
// and its connection back.
const DialTimeout = 10 * time.Second

// tunnels are the tunnel tokens waiting for their agent's connection.
type tunnels struct {
	waiting map[string]chan net.Conn
}

// DialSession opens a tunnel to the session of run ref on this machine:
// a connection to its loopback port, through the agent.
func (n *remoteNode) DialSession(ctx context.Context, ref job.RunRef) (net.Conn, error) {
	c, err := n.dial(ctx, &wire.Dial{Node: n.name, JobID: ref.Job, Run: ref.Run})
	if err != nil {
		return nil, fmt.Errorf("tunnel to %s on %s: %w", ref, n.name, err)
	}
	return c, nil
}

// DialFiles opens a tunnel to job jobID's files on this machine, which
// the agent serves as the job's account (account: its owner's Unix
// account).
func (n *remoteNode) DialFiles(ctx context.Context, jobID int64, account string) (net.Conn, error) {
	c, err := n.dial(ctx, &wire.Dial{Node: n.name, JobID: jobID, Files: &wire.FilesDial{Account: account}})
	if err != nil {
		return nil, fmt.Errorf("files of job %d on %s: %w", jobID, n.name, err)
	}
	return c, nil
}

// JobFiles are job jobID's files on this machine, through its agent.
func (n *remoteNode) JobFiles(jobID int64, account string) jobfiles.Files {
	return filehttp.NewClient(func(ctx context.Context) (net.Conn, error) { return n.DialFiles(ctx, jobID, account) })
}

// dial asks the agent for tunnel d, its token filled in, and waits for
// the agent's connection.
func (n *remoteNode) dial(ctx context.Context, d *wire.Dial) (net.Conn, error) {
	h := n.conn.hub
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	ch := make(chan net.Conn, 1)
	h.mu.Lock()
	h.tunnels.waiting[token] = ch
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.tunnels.waiting, token)
		h.mu.Unlock()
		// A connection that came after the wait ended is closed.
		select {
		case c := <-ch:
			c.Close()
		default:
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	acked := make(chan error, 1)
	d.Token = token
	go func() {
		acked <- n.conn.request(ctx, &wire.Message{Type: wire.TypeDial, Dial: d})
	}()
	for {
		select {
		case c := <-ch:
			return c, nil
		case err := <-acked:
			if err != nil {
				return nil, err
			}
			acked = nil // acknowledged: the connection is on its way
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// serveTunnel takes an agent's tunnel connection: it checks the one-time
// token, switches protocols and hands the connection to the DialSession
// that waits for it.
func (h *Hub) serveTunnel(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), wire.TunnelProtocol) {
		writeJSONError(w, http.StatusBadRequest, "a tunnel upgrades to "+wire.TunnelProtocol)
		return
	}
	token := r.Header.Get(wire.TunnelTokenHeader)
	h.mu.Lock()
	ch, ok := h.tunnels.waiting[token]
	delete(h.tunnels.waiting, token)
	h.mu.Unlock()
	if token == "" || !ok {
		h.log.Warn("tunnel refused: unknown or used token", "remote", r.RemoteAddr)
		writeJSONError(w, http.StatusUnauthorized, "unknown, used or expired tunnel token")
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeJSONError(w, http.StatusInternalServerError, "this server cannot take over connections")
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		h.log.Warn("tunnel: take over the connection", "remote", r.RemoteAddr, "err", err)
		return
	}
	_ = conn.SetDeadline(time.Time{}) // the server's timeouts are for requests
	if _, err := rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + wire.TunnelProtocol + "\r\nConnection: Upgrade\r\n\r\n"); err != nil {
		conn.Close()
		return
	}
	if err := rw.Flush(); err != nil {
		conn.Close()
		return
	}
	tc := net.Conn(conn)
	if rw.Reader.Buffered() > 0 {
		tc = &bufferedConn{Conn: conn, r: rw.Reader}
	}
	select {
	case ch <- tc:
	default:
		tc.Close()
	}
}

// bufferedConn is a connection whose first bytes were read ahead.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// ErrNoTunnel is returned by Hub.DialSession for a machine no agent runs.
var ErrNoTunnel = errors.New("no agent connected runs the machine")

// DialSession opens a tunnel to the session of run ref on machine node.
func (h *Hub) DialSession(ctx context.Context, node string, ref job.RunRef) (net.Conn, error) {
	c := h.owner(node)
	if c == nil {
		return nil, fmt.Errorf("tunnel to %s on %s: %w", ref, node, ErrNoTunnel)
	}
	n := c.nodes[node]
	if n == nil {
		return nil, fmt.Errorf("tunnel to %s on %s: %w", ref, node, ErrNoTunnel)
	}
	return n.DialSession(ctx, ref)
}
