package terminal

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func dial(t *testing.T, srv *httptest.Server, token string) (*websocket.Conn, int) {
	t.Helper()
	hdr := http.Header{}
	if token != "" {
		hdr.Set("Authorization", "token "+token)
	}
	c, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+Path, hdr)
	if err != nil {
		if resp != nil {
			return nil, resp.StatusCode
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, http.StatusSwitchingProtocols
}

func readUntil(t *testing.T, c *websocket.Conn, want string) {
	t.Helper()
	var got strings.Builder
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for !strings.Contains(got.String(), want) {
		_, b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("no %q in the output: %v\n%s", want, err, got.String())
		}
		got.Write(b)
	}
}

// TestTerminal: the token is required; what is typed runs; a resize
// reaches the shell; a client that reconnects gets the latest output
// first; a newer client takes over; exit ends the server with its status.
func TestTerminal(t *testing.T) {
	s, err := Start("/bin/sh", append(os.Environ(), "PS1=$ "), "tok", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	for _, tok := range []string{"", "wrong"} {
		if _, st := dial(t, srv, tok); st != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", tok, st)
		}
	}
	c, _ := dial(t, srv, "tok")
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"resize","cols":120,"rows":40}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMessage(websocket.BinaryMessage, []byte("echo out-$((40+2)) $(stty size)\n")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, "out-42 40 120")
	c2, _ := dial(t, srv, "tok")
	readUntil(t, c2, "out-42 40 120") // the backlog
	// The older client was closed by the newer one.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			if !websocket.IsCloseError(err, 4000) {
				t.Errorf("the older client ended with %v, want close 4000", err)
			}
			break
		}
	}
	done := make(chan int, 1)
	go func() { done <- s.Wait() }()
	_ = c2.WriteMessage(websocket.BinaryMessage, []byte("exit 3\n"))
	select {
	case code := <-done:
		if code != 3 {
			t.Errorf("exit status %d, want 3", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the shell did not exit")
	}
}

func TestServeWantsLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:80", "nonsense"} {
		if _, err := Serve(t.Context(), addr, "/bin/sh", "", nil, slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("Serve(%q) listened: want only loopback addresses", addr)
		}
	}
}
