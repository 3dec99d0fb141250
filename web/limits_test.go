package web

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestConnectionsPerAddress: the connection over the cap is closed on
// arrival, the others and other addresses are served, and a closed one
// frees its place.
func TestConnectionsPerAddress(t *testing.T) {
	ts := newTestServer(t)
	ts.cfg.MaxConnsPerAddr = 3
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := ts.HTTPServer()
	go func() { _ = srv.Serve(ts.LimitConnections(ln)) }()
	t.Cleanup(func() { srv.Close() })
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// healthz asks on c and reports whether it was answered.
	healthz := func(c net.Conn) bool {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			return false
		}
		b := make([]byte, 64)
		n, _ := c.Read(b)
		return strings.HasPrefix(string(b[:n]), "HTTP/1.1 200")
	}
	var held []net.Conn
	for range 3 {
		held = append(held, dial("127.0.0.1"))
	}
	for i, c := range held {
		if !healthz(c) {
			t.Errorf("connection %d under the cap: not served", i+1)
		}
	}
	if healthz(dial("127.0.0.1")) {
		t.Error("the connection over the cap was served")
	}
	if !healthz(dial("127.0.0.2")) {
		t.Error("another address was not served")
	}
	held[0].Close()
	time.Sleep(100 * time.Millisecond)
	if !healthz(dial("127.0.0.1")) {
		t.Error("a place freed by a closed connection was not given again")
	}
	if n := ts.refusedConns.Load(); n != 1 {
		t.Errorf("refused %d connections, want 1", n)
	}
}

// TestBodyLimits: a body over its route's limit is refused, naming the
// limit; a job may be larger than a login.
func TestBodyLimits(t *testing.T) {
	ts := newTestServer(t)
	big := strings.Repeat("x", defaultBodyLimit+1)
	if rec := ts.do(t, "anonymous", http.MethodPost, "/login", "username=a&password="+big); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("login with %d bytes: status %d, want 413", len(big), rec.Code)
	}
	job := `{"name":"x","team":"vision","gpus":1,"sim":{"duration_s":5},"padding":"` + big + `"}`
	if rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", job); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "unknown field") {
		t.Errorf("a job of %d bytes: status %d %.100s, want 400 for its unknown field (not 413)", len(job), rec.Code, rec.Body.String())
	}
	huge := `{"name":"` + strings.Repeat("x", jobBodyLimit) + `"}`
	if rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", huge); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a job of %d bytes: status %d, want 413", len(huge), rec.Code)
	}
}
