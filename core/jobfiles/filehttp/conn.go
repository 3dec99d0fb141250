package filehttp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// ServeConn serves s on the one connection c until the client is done
// with it (the Client sends one request per connection) or ctx ends.
func ServeConn(ctx context.Context, s *Server, c net.Conn) error {
	l := &oneConn{conn: &closeNotify{Conn: c, closed: make(chan struct{})}, taken: make(chan struct{})}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { _ = hs.Close(); _ = c.Close() })
	defer stop()
	err := hs.Serve(l)
	if errors.Is(err, errServed) || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// errServed ends Serve once the one connection is closed.
var errServed = errors.New("connection served")

// oneConn is a listener that accepts one connection, then waits until it
// is closed.
type oneConn struct {
	conn  *closeNotify
	once  sync.Once
	taken chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	var first bool
	l.once.Do(func() { first = true; close(l.taken) })
	if first {
		return l.conn, nil
	}
	<-l.conn.closed
	return nil, errServed
}

func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return l.conn.LocalAddr() }

// closeNotify is a connection that says when it was closed.
type closeNotify struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *closeNotify) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.closed) })
	return err
}

// StdioConn is a connection made of a process's standard input and
// output: the helper's (helper.go).
func StdioConn(in io.ReadCloser, out io.WriteCloser) net.Conn {
	return &stdioConn{in: in, out: out}
}

type stdioConn struct {
	in  io.ReadCloser
	out io.WriteCloser
}

func (c *stdioConn) Read(p []byte) (int, error)  { return c.in.Read(p) }
func (c *stdioConn) Write(p []byte) (int, error) { return c.out.Write(p) }
func (c *stdioConn) Close() error {
	err := c.out.Close()
	if ierr := c.in.Close(); err == nil {
		err = ierr
	}
	return err
}
func (c *stdioConn) LocalAddr() net.Addr              { return stdioAddr{} }
func (c *stdioConn) RemoteAddr() net.Addr             { return stdioAddr{} }
func (c *stdioConn) SetDeadline(time.Time) error      { return nil }
func (c *stdioConn) SetReadDeadline(time.Time) error  { return nil }
func (c *stdioConn) SetWriteDeadline(time.Time) error { return nil }
func (stdioAddr) Network() string                     { return "stdio" }
func (stdioAddr) String() string                      { return "stdio" }

type stdioAddr struct{}
