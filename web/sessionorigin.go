package web

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/app"
)

// Sessions on their own origin (docs/operations.md, "Sessions' own
// origin"). A session runs the user's code: its pages must never run on
// the portal's origin, where they could read the portal's pages and post
// its forms as whoever opens them. With Config.SessionOrigin set, each
// session is served on a host of its own, s<ID>.<domain>, and the portal
// hands a browser over with a grant: a random value, good once and for
// grantTTL, that the session's host exchanges for a cookie of its own
// (a pass), scoped to that host alone. The pass names the credential the
// browser proved on the portal (its login), so that every request on the
// session's host is judged by that credential's user as they are now,
// and ends with it.

// sessionOrigin is where sessions are served: a URL pattern whose host's
// first label is "*", one host per session.
type sessionOrigin struct {
	scheme string // "http" or "https"
	domain string // the host after "*.", lower case: "sessions.lab.example"
	port   string // "": the port the portal was reached on
}

// parseSessionOrigin reads a pattern such as https://*.sessions.lab.example
// or http://*.localhost:8080.
func parseSessionOrigin(s string) (*sessionOrigin, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: want http:// or https://, then *.DOMAIN", s)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: want only a scheme and a host, such as https://*.sessions.lab.example", s)
	}
	domain, ok := strings.CutPrefix(strings.ToLower(u.Hostname()), "*.")
	if !ok || domain == "" || !validDomain(domain) {
		return nil, fmt.Errorf("%q: the host must be *.DOMAIN (a wildcard host, one name per session), such as *.sessions.lab.example", s)
	}
	port := u.Port()
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q: port %q is not a port number", s, port)
		}
	}
	return &sessionOrigin{scheme: u.Scheme, domain: domain, port: port}, nil
}

// CheckSessionOrigin says what is wrong with a session origin pattern
// (Config.SessionOrigin), or nil.
func CheckSessionOrigin(s string) error {
	_, err := parseSessionOrigin(s)
	return err
}

// validDomain reports whether d is a DNS name of letters, digits, hyphens
// and dots, with no empty label.
func validDomain(d string) bool {
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return len(d) <= 240
}

// String is the pattern as parseSessionOrigin reads it.
func (o *sessionOrigin) String() string {
	h := "*." + o.domain
	if o.port != "" {
		h = net.JoinHostPort(h, o.port)
	}
	return o.scheme + "://" + h
}

// hostFor is the host (and port, unless it is the scheme's) of job id's
// session, for a browser that reached the portal at portalHost.
func (o *sessionOrigin) hostFor(id int64, portalHost string) string {
	h := "s" + strconv.FormatInt(id, 10) + "." + o.domain
	port := o.port
	if port == "" {
		_, port, _ = net.SplitHostPort(portalHost)
	}
	if port == "" || (o.scheme == "http" && port == "80") || (o.scheme == "https" && port == "443") {
		return h
	}
	return net.JoinHostPort(h, port)
}

// urlFor is the origin of job id's session: scheme and host.
func (o *sessionOrigin) urlFor(id int64, portalHost string) string {
	return o.scheme + "://" + o.hostFor(id, portalHost)
}

// jobOf returns the job whose session host is host (as a request's Host
// header has it), and whether host is a session's at all.
func (o *sessionOrigin) jobOf(host string) (int64, bool) {
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = host, ""
	}
	if o.port != "" && port != "" && port != o.port {
		return 0, false
	}
	label, ok := strings.CutSuffix(strings.ToLower(h), "."+o.domain)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutPrefix(label, "s")
	if !ok || digits == "" || digits[0] == '0' || len(digits) > 18 {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || id < 1 {
		return 0, false
	}
	return id, true
}

// sessionPass is what a grant or a session host's cookie stands for: a
// credential proved on the portal, for one job's session.
type sessionPass struct {
	cred    credential
	job     int64
	expires time.Time
}

// Bounds of the handover's keys, kept in memory: a server that restarts
// forgets them, and a browser is handed over again (the session's host
// sends it back to the portal).
const (
	grantTTL  = time.Minute
	passTTL   = 12 * time.Hour
	maxGrants = 4096
	maxPasses = 16384
	// passCookie is the session host's own cookie; __Host- is added over
	// HTTPS, so that no other host can set or shadow it.
	passCookie = "gpuportal_session_pass"
	// enterPath is where a session's host takes a grant.
	enterPath = "/_gpuportal/enter"
)

// sessionKeys holds the grants and passes handed out, by the hash of
// their value (never the value itself).
type sessionKeys struct {
	mu     sync.Mutex
	grants map[string]sessionPass
	passes map[string]sessionPass
}

func newSessionKeys() *sessionKeys {
	return &sessionKeys{grants: make(map[string]sessionPass), passes: make(map[string]sessionPass)}
}

// issue returns a new random value standing for p in m (grants or
// passes), after dropping expired entries and, past limit, the entries
// nearest their end.
func (k *sessionKeys) issue(m map[string]sessionPass, p sessionPass, now time.Time, limit int) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("session key: %w", err)
	}
	v := hex.EncodeToString(b)
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(m) >= limit {
		for h, e := range m {
			if !now.Before(e.expires) {
				delete(m, h)
			}
		}
		for h := range m { // still full: drop any (map order), a tenth
			if len(m) < limit-limit/10 {
				break
			}
			delete(m, h)
		}
	}
	m[app.HashToken(v)] = p
	return v, nil
}

// grant hands out a single-use grant for p.
func (k *sessionKeys) grant(p sessionPass, now time.Time) (string, error) {
	p.expires = now.Add(grantTTL)
	return k.issue(k.grants, p, now, maxGrants)
}

// redeem takes grant v, once: its pass, and whether it was good.
func (k *sessionKeys) redeem(v string, now time.Time) (sessionPass, bool) {
	h := app.HashToken(v)
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.grants[h]
	delete(k.grants, h)
	return p, ok && now.Before(p.expires)
}

// pass issues the cookie value for p.
func (k *sessionKeys) pass(p sessionPass, now time.Time) (string, error) {
	p.expires = now.Add(passTTL)
	return k.issue(k.passes, p, now, maxPasses)
}

// lookup returns the pass cookie value v stands for.
func (k *sessionKeys) lookup(v string, now time.Time) (sessionPass, bool) {
	h := app.HashToken(v)
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.passes[h]
	if ok && !now.Before(p.expires) {
		delete(k.passes, h)
		ok = false
	}
	return p, ok
}
