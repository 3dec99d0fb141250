package hub

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gpuportal/gpuportal/core/agent/wire"
)

// fakeMachines is a MachineStore in memory that can be taken down, as a
// database outage does: every call then fails.
type fakeMachines struct {
	mu    sync.Mutex
	down  bool
	creds map[string]string // machine name -> credential
	n     int
}

var errDown = errors.New("connection refused")

func (f *fakeMachines) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *fakeMachines) JoinToken(context.Context, string, time.Time) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return 0, errDown
	}
	return 0, ErrNotFound
}

func (f *fakeMachines) MachineCredential(_ context.Context, credential string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return false, errDown
	}
	for _, c := range f.creds {
		if c == credential {
			return true, nil
		}
	}
	return false, nil
}

func (f *fakeMachines) RegisterMachine(_ context.Context, name string, _ int64, _ time.Time) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return "", errDown
	}
	f.n++
	c := "gpm_" + name + strings.Repeat("x", f.n)
	f.creds[name] = c
	return c, nil
}

func (f *fakeMachines) CheckMachine(_ context.Context, name, credential string, _ time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errDown
	}
	c, ok := f.creds[name]
	switch {
	case !ok:
		return ErrNotFound
	case c != credential:
		return ErrWrongCredential
	}
	return nil
}

func (f *fakeMachines) RemoveMachine(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.creds, name)
	return nil
}

// dialWith says hello for one machine with bearer token and the
// machine's credential; it returns the HTTP status of a refusal, or the
// server's first message.
func dialWith(t *testing.T, srv *httptest.Server, bearer, name, credential string) (int, *wire.Message, error) {
	t.Helper()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + wire.Path
	ws, resp, err := websocket.DefaultDialer.Dial(url, http.Header{"Authorization": {"Bearer " + bearer}})
	if err != nil {
		if resp == nil {
			t.Fatal(err)
		}
		return resp.StatusCode, nil, err
	}
	t.Cleanup(func() { ws.Close() })
	hello := helloFor(name)
	hello.Nodes[0].Credential = credential
	if err := ws.WriteJSON(wire.Message{Type: wire.TypeHello, Hello: &hello}); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	var m wire.Message
	err = ws.ReadJSON(&m)
	if err == nil && m.Type == wire.TypeWelcome {
		ws.Close() // the machine leaves again
	}
	return http.StatusSwitchingProtocols, &m, err
}

// TestMachinesRejoinDuringAStoreOutage: while the machine store does not
// answer (a database outage the leader rides out), a machine whose
// credential the hub checked before rejoins with it, so that its agent
// keeps its runs; an unknown credential is answered 503 (try again), not
// counted as a wrong token; and no new machine is registered.
func TestMachinesRejoinDuringAStoreOutage(t *testing.T) {
	ms := &fakeMachines{creds: make(map[string]string)}
	reg := newFakeRegistry()
	dir := t.TempDir()
	srv := httptest.NewServer(New(Config{Token: testAgentToken, HeartbeatTimeout: 2 * time.Second, Dir: dir, Machines: ms},
		reg, slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(srv.Close)

	_, m, err := dialWith(t, srv, testAgentToken, "m1", "")
	if err != nil || m.Type != wire.TypeWelcome || len(m.Welcome.Credentials) != 1 {
		t.Fatalf("join: %+v, %v; want a welcome with m1's credential", m, err)
	}
	cred := m.Welcome.Credentials[0].Credential
	waitUntil(t, "m1 to leave", func() bool { return reg.node("m1") == nil })

	ms.setDown(true)
	// A server restarted during the outage: its hub, on the same folder,
	// remembers what the first one checked.
	restarted := httptest.NewServer(New(Config{Token: testAgentToken, HeartbeatTimeout: 2 * time.Second, Dir: dir, Machines: ms},
		newFakeRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(restarted.Close)
	tests := []struct {
		srv        *httptest.Server
		name       string
		bearer     string
		machine    string
		credential string
		status     int    // of the HTTP answer
		close      string // what the close names, when the hello is refused
	}{
		{srv, "its own credential", cred, "m1", cred, http.StatusSwitchingProtocols, ""},
		{srv, "the join token and its own credential", testAgentToken, "m1", cred, http.StatusSwitchingProtocols, ""},
		{srv, "an unknown credential", "gpm_unknown", "m1", "gpm_unknown", http.StatusServiceUnavailable, ""},
		{srv, "another machine's name", cred, "m2", cred, http.StatusSwitchingProtocols, "database does not answer"},
		{srv, "a new machine with the join token", testAgentToken, "m3", "", http.StatusSwitchingProtocols, "database does not answer"},
		{restarted, "restarted: its own credential", cred, "m1", cred, http.StatusSwitchingProtocols, ""},
		{restarted, "restarted: the join token and its own credential", testAgentToken, "m1", cred, http.StatusSwitchingProtocols, ""},
		{restarted, "restarted: an unknown credential", "gpm_unknown", "m1", "gpm_unknown", http.StatusServiceUnavailable, ""},
		{restarted, "restarted: another machine's name", cred, "m2", cred, http.StatusSwitchingProtocols, "database does not answer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// More tries than the wrong-token limit: an outage is no
			// wrong token.
			for range agentTokenFailures + 1 {
				st, m, err := dialWith(t, tc.srv, tc.bearer, tc.machine, tc.credential)
				if st != tc.status {
					t.Fatalf("status %d (%v); want %d", st, err, tc.status)
				}
				if st != http.StatusSwitchingProtocols {
					continue
				}
				var ce *websocket.CloseError
				switch {
				case tc.close == "" && (err != nil || m.Type != wire.TypeWelcome):
					t.Fatalf("answer %+v, %v; want a welcome", m, err)
				case tc.close != "" && (!errors.As(err, &ce) || !strings.Contains(ce.Text, tc.close)):
					t.Fatalf("answer %+v, %v; want a close naming %q", m, err, tc.close)
				}
			}
		})
	}
	if len(ms.creds) != 1 {
		t.Errorf("machines registered: %v; want m1 alone", ms.creds)
	}
	kept, err := os.ReadFile(filepath.Join(dir, knownFile))
	if err != nil || strings.Contains(string(kept), cred) || !strings.Contains(string(kept), `"m1"`) {
		t.Errorf("%s: %q, %v; want m1 with its credential hashed, never in clear", knownFile, kept, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, knownFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, %v; want mode 0600", knownFile, fi, err)
	}
}
