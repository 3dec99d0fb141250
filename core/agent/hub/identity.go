package hub

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/wire"
)

// Machine identity (docs/agents.md, "Joining machines"). An agent presents
// a join token (an admin's, or the server's --agent-token) or the
// credential of a machine it registered before. A machine not yet
// registered is registered under the join token and gets a credential of
// its own, which its agent keeps and presents from then on; a registered
// machine must be presented with its credential. So a second agent that
// uses a taken name is refused, and a token shared by many agents lets no
// one take over another's machine.

// While the store does not answer (a database outage the leader rides
// out, server/serve_leader.go), an agent that reconnects is let
// in on what this hub checked before: a machine whose credential it saw
// match the store (or registered) joins with that credential, and keeps
// its runs. Nothing is registered then, and any other agent is answered
// 503, to try again (errStoreOut). The hub keeps what it checked on disk
// (knownFile in Config.Dir: each machine's name and the SHA-256 of its
// credential, never the credential), so that a server restarted during
// the outage lets its machines back in too. An admin's removal of a
// machine is seen at its next check that the store answers; the machines
// a hub remembers are those it ran, which a removal does not disconnect
// either.

// errStoreOut is why an agent is refused while the machine store does not
// answer.
var errStoreOut = errors.New("the server cannot check machine credentials now (its database does not answer): try again")

// knownFile is the file in Config.Dir that keeps the machines' checked
// credentials, hashed, across restarts.
const knownFile = "machines-checked.json"

// knownCredentials are the machines' credentials this hub checked against
// the store, hashed: machine name -> SHA-256 of its credential. With a
// path, every change is written there (0600, replaced whole) and
// loadKnown reads it back.
type knownCredentials struct {
	mu     sync.Mutex
	path   string // "": kept in memory only
	log    *slog.Logger
	byName map[string][sha256.Size]byte
}

// loadKnown reads the credentials a hub kept in path; a missing file is
// none, an unreadable one is logged and taken as none.
func loadKnown(path string, log *slog.Logger) *knownCredentials {
	k := &knownCredentials{path: path, log: log, byName: make(map[string][sha256.Size]byte)}
	if path == "" {
		return k
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return k
	}
	var stored map[string]string // name -> hex SHA-256
	if err == nil {
		err = json.Unmarshal(b, &stored)
	}
	for name, h := range stored {
		var sum [sha256.Size]byte
		if d, derr := hex.DecodeString(h); derr == nil && len(d) == sha256.Size {
			copy(sum[:], d)
			k.byName[name] = sum
		}
	}
	if err != nil {
		log.Warn("machines' checked credentials unreadable: a database outage lets in only machines checked from now on", "file", path, "err", err)
	}
	return k
}

func (k *knownCredentials) set(name, credential string) {
	sum := sha256.Sum256([]byte(credential))
	k.mu.Lock()
	defer k.mu.Unlock()
	if old, ok := k.byName[name]; ok && old == sum {
		return
	}
	k.byName[name] = sum
	k.save()
}

func (k *knownCredentials) forget(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.byName[name]; !ok {
		return
	}
	delete(k.byName, name)
	k.save()
}

// save writes the credentials to k.path, k.mu held. A failure is logged:
// the hub goes on with what it has in memory.
func (k *knownCredentials) save() {
	if k.path == "" {
		return
	}
	stored := make(map[string]string, len(k.byName))
	for name, sum := range k.byName {
		stored[name] = hex.EncodeToString(sum[:])
	}
	b, err := json.Marshal(stored)
	if err == nil {
		err = writeFileAtomic(k.path, b)
	}
	if err != nil {
		k.log.Warn("keep the machines' checked credentials on disk", "file", k.path, "err", err)
	}
}

// writeFileAtomic replaces path with b (0600), through a temporary file
// in its folder, so that a crash leaves the old file or the new.
func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// matches reports whether credential is the one last checked for name.
func (k *knownCredentials) matches(name, credential string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	want, ok := k.byName[name]
	got := sha256.Sum256([]byte(credential))
	return ok && subtle.ConstantTimeCompare(want[:], got[:]) == 1
}

// any reports whether credential is the one last checked for some machine.
func (k *knownCredentials) any(credential string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	got := sha256.Sum256([]byte(credential))
	for _, want := range k.byName {
		if subtle.ConstantTimeCompare(want[:], got[:]) == 1 {
			return true
		}
	}
	return false
}

// storeOut is errStoreOut with the store's error err.
func storeOut(err error) error { return fmt.Errorf("%w: %w", errStoreOut, err) }

// MachineStore keeps join tokens and machines (models.Store, through the
// serve command's adapter).
type MachineStore interface {
	// JoinToken returns the ID of the active join token token; an error
	// wrapping ErrNotFound when it is none (or revoked, or expired).
	JoinToken(ctx context.Context, token string, now time.Time) (id int64, err error)
	// MachineCredential reports whether credential is a registered
	// machine's.
	MachineCredential(ctx context.Context, credential string) (bool, error)
	// RegisterMachine registers a machine under the join token joinedWith
	// (0: the server's --agent-token) and returns its new credential.
	RegisterMachine(ctx context.Context, name string, joinedWith int64, now time.Time) (credential string, err error)
	// CheckMachine returns nil when name is registered with credential,
	// an error wrapping ErrNotFound when name is not registered, and one
	// wrapping ErrWrongCredential when credential is not its own.
	CheckMachine(ctx context.Context, name, credential string, now time.Time) error
	// RemoveMachine forgets a machine's registration.
	RemoveMachine(ctx context.Context, name string) error
}

// The errors a MachineStore wraps.
var (
	ErrNotFound        = errors.New("not found")
	ErrWrongCredential = errors.New("the machine's credential does not match")
)

// Wrong agent tokens from one address: at most agentTokenFailures within
// agentTokenWindow, then 429 until the window has passed.
const (
	agentTokenFailures = 10
	agentTokenWindow   = 5 * time.Minute
)

// agentAuth is what an agent's bearer token proved.
type agentAuth struct {
	join    bool  // a join token: it may register new machines
	tokenID int64 // the join token's ID; 0 for the server's --agent-token
	machine bool  // a machine credential: only registered machines
}

// authenticate checks an agent's bearer token.
func (h *Hub) authenticate(ctx context.Context, token string, now time.Time) (agentAuth, error) {
	if token == "" {
		return agentAuth{}, errors.New("no token")
	}
	if h.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(h.cfg.Token)) == 1 {
		return agentAuth{join: true}, nil
	}
	if h.cfg.Machines == nil {
		return agentAuth{}, errors.New("wrong token")
	}
	id, err := h.cfg.Machines.JoinToken(ctx, token, now)
	if err == nil {
		return agentAuth{join: true, tokenID: id}, nil
	}
	ok := false
	if errors.Is(err, ErrNotFound) {
		ok, err = h.cfg.Machines.MachineCredential(ctx, token)
	}
	if err != nil {
		if h.known.any(token) {
			// A machine's credential this hub checked: its machines are
			// checked by name in identify.
			return agentAuth{machine: true}, nil
		}
		return agentAuth{}, storeOut(err)
	}
	if !ok {
		return agentAuth{}, errors.New("wrong token")
	}
	return agentAuth{machine: true}, nil
}

// identify checks the machines of a hello against their credentials and
// registers the new ones, returning their credentials. On error nothing
// stays registered.
func (h *Hub) identify(ctx context.Context, auth agentAuth, nodes []wire.Node) ([]wire.NodeCredential, error) {
	ms := h.cfg.Machines
	if ms == nil {
		return nil, nil
	}
	now := time.Now()
	var creds []wire.NodeCredential
	undo := func() { h.unregisterMachines(ctx, creds) }
	for _, n := range nodes {
		err := ms.CheckMachine(ctx, n.Name, n.Credential, now)
		switch {
		case err == nil:
			h.known.set(n.Name, n.Credential)
			continue
		case errors.Is(err, ErrWrongCredential):
			h.known.forget(n.Name)
			undo()
			return nil, fmt.Errorf("machine name %s is taken by another machine (this agent lacks its credential): give this agent another --name; "+
				"if this is that machine and its work folder was lost, an admin removes the old registration (gpuportal admin remove-machine %s)", n.Name, n.Name)
		case !errors.Is(err, ErrNotFound):
			if n.Credential != "" && h.known.matches(n.Name, n.Credential) {
				h.log.Warn("machine let in on its credential checked before: the store does not answer", "node", n.Name, "err", err)
				continue
			}
			undo()
			return nil, fmt.Errorf("machine %s: %w", n.Name, storeOut(err))
		}
		h.known.forget(n.Name)
		if !auth.join {
			undo()
			return nil, fmt.Errorf("machine %s is not registered: its agent must join with a join token (gpuportal admin create-join-token)", n.Name)
		}
		cred, err := ms.RegisterMachine(ctx, n.Name, auth.tokenID, now)
		if err != nil {
			undo()
			return nil, fmt.Errorf("register machine %s: %w", n.Name, err)
		}
		h.known.set(n.Name, cred)
		h.log.Info("machine registered", "node", n.Name, "join_token", auth.tokenID)
		creds = append(creds, wire.NodeCredential{Node: n.Name, Credential: cred})
	}
	return creds, nil
}

// unregisterMachines forgets machines registered for a hello that failed.
func (h *Hub) unregisterMachines(ctx context.Context, creds []wire.NodeCredential) {
	for _, c := range creds {
		h.known.forget(c.Node)
		if err := h.cfg.Machines.RemoveMachine(context.WithoutCancel(ctx), c.Node); err != nil {
			h.log.Error("undo a machine's registration", "node", c.Node, "err", err)
		}
	}
}

// clientAddr is the host part of a remote address, the key of the wrong
// token limit.
func clientAddr(remote string) string {
	if host, _, err := net.SplitHostPort(remote); err == nil {
		return host
	}
	return remote
}
