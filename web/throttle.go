package web

import (
	"net"
	"strings"
	"sync"
	"time"
)

// Failed logins are throttled per (account, client address): after
// pairFree failures of one name from one address, each further attempt
// from there waits a delay that doubles with every failure, from
// throttleBase up to throttleMax. Another address is not slowed, so
// nobody can lock an account (an admin's, say) by failing its password
// from elsewhere; a correct password ends its pair's delay. One address
// guessing across many names is throttled alike after addrFree failures
// in all. A throttled attempt is refused before its password is checked.
const (
	pairFree     = 5
	addrFree     = 50
	throttleBase = time.Second
	throttleMax  = 15 * time.Minute
	// throttleForget is how long a key is kept after its last failure.
	throttleForget = time.Hour
	// throttleKeys bounds the keys kept; older ones are pruned beyond it.
	throttleKeys = 100_000
)

// throttle slows repeated failures per key with growing delays.
type throttle struct {
	mu   sync.Mutex
	keys map[string]*strikes
}

// strikes is one key's failures in a row and when it may try again.
type strikes struct {
	n     int
	last  time.Time
	until time.Time
}

func newThrottle() *throttle { return &throttle{keys: make(map[string]*strikes)} }

// loginKeys are the keys a login for name from addr counts under: the
// pair, and the address (an IPv6 client by its /64, which one host
// usually holds whole).
func loginKeys(name, addr string) (pair, address string) {
	if ip := net.ParseIP(addr); ip != nil && ip.To4() == nil {
		addr = ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return "pair:" + strings.ToLower(name) + "\x00" + addr, "addr:" + addr
}

// wait returns how long key must still wait at now; 0 when it may try.
func (t *throttle) wait(now time.Time, key string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.keys[key]
	if st == nil || !now.Before(st.until) {
		return 0
	}
	return st.until.Sub(now)
}

// fail counts a failure of key at now; past free failures in a row, the
// key waits a delay that doubles with each.
func (t *throttle) fail(now time.Time, key string, free int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.keys[key]
	if st == nil || now.Sub(st.last) >= throttleForget {
		if len(t.keys) >= throttleKeys {
			t.pruneLocked(now)
		}
		st = &strikes{}
		t.keys[key] = st
	}
	st.n++
	st.last = now
	if over := st.n - free; over > 0 {
		d := throttleMax
		if over <= 20 && throttleBase<<(over-1) < throttleMax {
			d = throttleBase << (over - 1)
		}
		st.until = now.Add(d)
	}
}

// succeed forgets key's failures.
func (t *throttle) succeed(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, key)
}

// pruneLocked drops the keys nobody failed for throttleForget, and if
// that is not enough, those that wait no more.
func (t *throttle) pruneLocked(now time.Time) {
	for k, st := range t.keys {
		if now.Sub(st.last) >= throttleForget {
			delete(t.keys, k)
		}
	}
	if len(t.keys) < throttleKeys {
		return
	}
	for k, st := range t.keys {
		if !now.Before(st.until) {
			delete(t.keys, k)
		}
	}
}
