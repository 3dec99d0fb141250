// Package terminal serves a terminal session (job.SessionTerminal): one
// shell in a pseudo-terminal, reached by websocket at /pty on a loopback
// port. The agent starts it as the session's command (gpuportal
// session-terminal), so the shell runs as the job's account, in the job's
// process group and cgroup, with its GPUs; the portal proxies the
// websocket and draws it with xterm.js (static/terminal.js).
//
// The protocol: the client's binary frames are the terminal's input; its
// text frames are JSON control messages ({"type":"resize","cols":C,
// "rows":R}); the server's binary frames are the terminal's output. A
// client that connects (again) first gets the latest output (Scrollback
// bytes), then what follows: so a browser that lost its connection
// reconnects to the same shell. A newer connection takes over from an
// older one. When the shell exits, the server ends with its exit status,
// and with it the session's job.
package terminal

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"
)

// Scrollback is how much of the latest output a (re)connecting client
// gets.
const Scrollback = 64 << 10

// Path is where the terminal's websocket is served.
const Path = "/pty"

// Control is a control message from the client.
type Control struct {
	Type string `json:"type"` // "resize"
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// Server is one shell and the websocket clients that attach to it.
type Server struct {
	token string // required as "Authorization: token T"; empty: none
	log   *slog.Logger
	ptmx  *os.File
	cmd   *exec.Cmd

	mu     sync.Mutex
	buf    []byte          // the latest output, at most Scrollback bytes
	client *websocket.Conn // the attached client; nil: none
	wmu    sync.Mutex      // one writer to client at a time

	upgrader websocket.Upgrader
}

// Start starts shell in a pseudo-terminal with env. Requests must carry
// token (the portal's proxy adds it); empty accepts any.
func Start(shell string, env []string, token string, log *slog.Logger) (*Server, error) {
	cmd := exec.Command(shell, "-l")
	cmd.Env = env
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 80, Rows: 24})
	if err != nil {
		return nil, fmt.Errorf("terminal: start %s: %w", shell, err)
	}
	s := &Server{token: token, log: log, ptmx: ptmx, cmd: cmd}
	// The portal's proxy checked the browser's origin; here only the
	// proxy's token counts.
	s.upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	go s.readOutput()
	return s, nil
}

// readOutput keeps the latest output and sends it to the attached client.
func (s *Server) readOutput() {
	b := make([]byte, 32<<10)
	for {
		n, err := s.ptmx.Read(b)
		if n > 0 {
			chunk := append([]byte(nil), b[:n]...)
			s.mu.Lock()
			s.buf = append(s.buf, chunk...)
			if len(s.buf) > Scrollback {
				s.buf = append([]byte(nil), s.buf[len(s.buf)-Scrollback:]...)
			}
			c := s.client
			s.mu.Unlock()
			if c != nil {
				s.write(c, chunk)
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *Server) write(c *websocket.Conn, b []byte) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := c.WriteMessage(websocket.BinaryMessage, b); err != nil {
		c.Close()
	}
}

// ServeHTTP attaches a websocket client at Path.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.NotFound(w, r)
		return
	}
	if s.token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("token "+s.token)) != 1 {
		http.Error(w, "missing or wrong session token", http.StatusUnauthorized)
		return
	}
	c, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader answered
	}
	c.SetReadLimit(1 << 20)
	s.wmu.Lock()
	s.mu.Lock()
	old := s.client
	s.client = c
	backlog := append([]byte(nil), s.buf...)
	s.mu.Unlock()
	if old != nil {
		_ = old.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "another window took over the terminal"), time.Now().Add(time.Second))
		old.Close()
	}
	s.wmu.Unlock()
	if len(backlog) > 0 {
		s.write(c, backlog)
	}
	defer func() {
		s.mu.Lock()
		if s.client == c {
			s.client = nil
		}
		s.mu.Unlock()
		c.Close()
	}()
	for {
		kind, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		switch kind {
		case websocket.BinaryMessage:
			if _, err := s.ptmx.Write(data); err != nil {
				return
			}
		case websocket.TextMessage:
			var ctl Control
			if err := json.Unmarshal(data, &ctl); err != nil || ctl.Type != "resize" {
				s.log.Warn("terminal: unknown control message", "err", err)
				continue
			}
			if ctl.Cols > 0 && ctl.Rows > 0 {
				_ = pty.Setsize(s.ptmx, &pty.Winsize{Cols: ctl.Cols, Rows: ctl.Rows})
			}
		}
	}
}

// Wait waits for the shell to exit and returns its exit status.
func (s *Server) Wait() int {
	err := s.cmd.Wait()
	s.ptmx.Close()
	s.mu.Lock()
	c := s.client
	s.mu.Unlock()
	if c != nil {
		s.wmu.Lock()
		_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "the shell exited"), time.Now().Add(time.Second))
		s.wmu.Unlock()
		c.Close()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return 1
	}
	return 0
}

// Serve listens on addr (a loopback address), serves the terminal of
// shell and returns the shell's exit status when it exits or ctx ends.
func Serve(ctx context.Context, addr, shell, token string, env []string, log *slog.Logger) (int, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return 1, fmt.Errorf("terminal: --listen %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return 1, fmt.Errorf("terminal: --listen %q: want a loopback address (127.0.0.1:PORT): the portal reaches sessions through the agent", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return 1, fmt.Errorf("terminal: %w", err)
	}
	s, err := Start(shell, env, token, log)
	if err != nil {
		l.Close()
		return 1, err
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(l) }()
	done := make(chan int, 1)
	go func() { done <- s.Wait() }()
	select {
	case code := <-done:
		_ = hs.Close()
		return code, nil
	case <-ctx.Done():
		_ = s.cmd.Process.Kill()
		<-done
		_ = hs.Close()
		return 1, ctx.Err()
	}
}
