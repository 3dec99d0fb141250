// Package outbound decides where the server's own requests to addresses
// that users name (webhooks) may go, and holds them to it when they
// connect. Loopback, private, link-local, unspecified, multicast, shared
// (CGNAT) and other addresses that are not the Internet's, and the
// server's own listen addresses, are refused unless the operator allowed
// them (serve --webhook-allow): a user must not reach, through the
// server, what only the server can reach. The rules apply to the address
// a connection is about to be made to, after name resolution, so neither
// a name that resolves to a refused address (DNS rebinding included) nor
// a redirect gets around them.
package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Policy says which addresses outbound requests may reach. The nil
// *Policy refuses every special address and allows the rest.
type Policy struct {
	allow []entry
	// own are the server's listen addresses.
	own []netip.AddrPort
}

// entry is one allowed destination: a network (any address in it), or a
// host name; on one port, or on any (port 0).
type entry struct {
	prefix netip.Prefix // valid for a network or an address
	host   string       // lower case, for a name
	port   uint16
}

func (e entry) String() string {
	h := e.host
	if e.prefix.IsValid() {
		h = e.prefix.String()
		if e.prefix.IsSingleIP() {
			h = e.prefix.Addr().String()
		}
	}
	if e.port == 0 {
		return h
	}
	return net.JoinHostPort(h, strconv.Itoa(int(e.port)))
}

// Parse reads an allow list: comma-separated CIDRs (10.0.0.0/8,
// fd00::/8), addresses (10.1.2.3, fd00::1) and host names
// (hooks.lab.internal), each optionally with a port (10.1.2.3:9000,
// [fd00::1]:9000, hooks.lab.internal:443; a CIDR takes none). An entry
// without a port allows every port but the server's own listen
// addresses, which only an entry naming the address and its port allows.
// A name allows whatever it resolves to. The empty list allows nothing.
func Parse(list string) (*Policy, error) {
	p := &Policy{}
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		e, err := parseEntry(part)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		p.allow = append(p.allow, e)
	}
	return p, nil
}

func parseEntry(s string) (entry, error) {
	if strings.Contains(s, "://") {
		return entry{}, errors.New("a URL: want an address, a CIDR or a host name, with no scheme")
	}
	if strings.Contains(s, "/") {
		pr, err := netip.ParsePrefix(s)
		if err != nil {
			return entry{}, errors.New("not a CIDR such as 10.0.0.0/8 or fd00::/8")
		}
		if pr.Addr().Zone() != "" {
			return entry{}, errors.New("an address with a zone (%...) is not allowed")
		}
		return entry{prefix: pr.Masked()}, nil
	}
	host, port := s, uint16(0)
	if a, err := netip.ParseAddr(s); err == nil {
		return addrEntry(a, 0)
	}
	if h, ps, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.ParseUint(ps, 10, 16)
		if err != nil || n == 0 {
			return entry{}, fmt.Errorf("port %q: want a number from 1 to 65535", ps)
		}
		host, port = h, uint16(n)
		if a, err := netip.ParseAddr(host); err == nil {
			return addrEntry(a, port)
		}
	}
	name, err := hostName(host)
	if err != nil {
		return entry{}, err
	}
	return entry{host: name, port: port}, nil
}

func addrEntry(a netip.Addr, port uint16) (entry, error) {
	if a.Zone() != "" {
		return entry{}, errors.New("an address with a zone (%...) is not allowed")
	}
	a = a.Unmap()
	return entry{prefix: netip.PrefixFrom(a, a.BitLen()), port: port}, nil
}

// hostName is s as a host name to compare: lower case, without a final
// dot; an error when s is none.
func hostName(s string) (string, error) {
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	if s == "" || len(s) > 253 {
		return "", errors.New("not an address, a CIDR or a host name")
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return "", errors.New("not an address, a CIDR or a host name")
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return "", errors.New("not an address, a CIDR or a host name")
			}
		}
	}
	return s, nil
}

// WithOwn is p that also refuses addrs, the server's own listen
// addresses, unless an entry names one with its port.
func (p *Policy) WithOwn(addrs ...netip.AddrPort) *Policy {
	out := &Policy{}
	if p != nil {
		out.allow = p.allow
		out.own = append(out.own, p.own...)
	}
	for _, a := range addrs {
		out.own = append(out.own, netip.AddrPortFrom(a.Addr().Unmap(), a.Port()))
	}
	return out
}

// OwnAddrs are the addresses a listener on addr is reached at: addr
// itself, or, on the unspecified address (every address of the machine),
// each address of the machine's interfaces with addr's port.
func OwnAddrs(addr net.Addr) []netip.AddrPort {
	t, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	ap := t.AddrPort()
	if !ap.Addr().Unmap().IsUnspecified() {
		return []netip.AddrPort{ap}
	}
	out := []netip.AddrPort{ap}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return out
	}
	for _, ia := range ifaddrs {
		if n, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, netip.AddrPortFrom(a.Unmap(), ap.Port()))
			}
		}
	}
	return out
}

// String is p's allow list as Parse reads it, "none" when empty.
func (p *Policy) String() string {
	if p == nil || len(p.allow) == 0 {
		return "none"
	}
	parts := make([]string, len(p.allow))
	for i, e := range p.allow {
		parts[i] = e.String()
	}
	return strings.Join(parts, ",")
}

// RefusedError is a destination the policy refuses.
type RefusedError struct {
	// Addr is the refused address; Host the name it was reached by, if
	// any.
	Addr netip.AddrPort
	Host string
	// Kind says what the address is: "loopback", "private", ...
	Kind string
}

func (e *RefusedError) Error() string {
	what := e.Addr.Addr().String()
	if e.Host != "" && e.Host != what {
		what = fmt.Sprintf("%s (%s)", e.Host, what)
	}
	if e.Kind == kindOwn {
		return fmt.Sprintf("%s is this server's own address", net.JoinHostPort(what, strconv.Itoa(int(e.Addr.Port()))))
	}
	return fmt.Sprintf("%s is %s %s address", what, article(e.Kind), e.Kind)
}

func article(kind string) string {
	if strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an"
	}
	return "a"
}

const kindOwn = "own"

// special are the networks that are not the Internet's, with what each
// is. IPv4 addresses inside IPv6 (mapped, NAT64, 6to4) are checked as the
// IPv4 address they carry.
var special = []struct {
	prefix netip.Prefix
	kind   string
}{
	{netip.MustParsePrefix("0.0.0.0/32"), "unspecified"},
	{netip.MustParsePrefix("0.0.0.0/8"), "reserved (this network)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved (IETF protocol assignments)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "reserved (documentation)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved (benchmarking)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "reserved (documentation)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "reserved (documentation)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "reserved (IPv4-compatible)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "private"},
	{netip.MustParsePrefix("100::/64"), "reserved (discard)"},
	{netip.MustParsePrefix("2001:db8::/32"), "reserved (documentation)"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "private"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Kind says what a is when it is not an Internet address ("loopback",
// "private", "link-local", ...), "" when it is one.
func Kind(a netip.Addr) string {
	a = a.WithZone("").Unmap()
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return Kind(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		return Kind(netip.AddrFrom4([4]byte(b[2:6])))
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return s.kind
		}
	}
	return ""
}

// Check says why p refuses a connection to ap, reached by the name host
// ("" or the address itself when none): a *RefusedError, or nil.
func (p *Policy) Check(host string, ap netip.AddrPort) error {
	ap = netip.AddrPortFrom(ap.Addr().WithZone("").Unmap(), ap.Port())
	name, _ := hostName(host)
	if _, err := netip.ParseAddr(host); err == nil {
		name = ""
	}
	own := p != nil && containsAddrPort(p.own, ap)
	if p != nil {
		for _, e := range p.allow {
			if e.port != 0 && e.port != ap.Port() {
				continue
			}
			if own && e.port == 0 {
				continue // the server itself only where an entry names its port
			}
			if e.prefix.IsValid() && e.prefix.Contains(ap.Addr()) || e.host != "" && e.host == name {
				return nil
			}
		}
	}
	if own {
		return &RefusedError{Addr: ap, Host: name, Kind: kindOwn}
	}
	if k := Kind(ap.Addr()); k != "" {
		return &RefusedError{Addr: ap, Host: name, Kind: k}
	}
	return nil
}

func containsAddrPort(list []netip.AddrPort, ap netip.AddrPort) bool {
	for _, o := range list {
		if o == ap {
			return true
		}
	}
	return false
}

// CheckURL says why p refuses raw's host before any request: when it is
// an address p refuses, or a name that is always the local machine's
// (localhost). It resolves no name (that happens, and is checked, at each
// connection) and leaves what is not a URL to the caller.
func (p *Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	port := uint16(80)
	if u.Scheme == "https" {
		port = 443
	}
	if ps := u.Port(); ps != "" {
		n, err := strconv.ParseUint(ps, 10, 16)
		if err != nil {
			return fmt.Errorf("port %q: want a number from 1 to 65535", ps)
		}
		port = uint16(n)
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		return p.Check(host, netip.AddrPortFrom(a, port))
	}
	if name, _ := hostName(host); name == "localhost" || strings.HasSuffix(name, ".localhost") {
		// RFC 6761: always loopback. Allowed where its addresses are.
		err4 := p.Check(name, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port))
		err6 := p.Check(name, netip.AddrPortFrom(netip.IPv6Loopback(), port))
		if err4 != nil && err6 != nil {
			return err4
		}
	}
	return nil
}

// DialContext connects as a net.Dialer does, to each address addr's
// host resolves to that p allows, and fails without connecting when p
// refuses them all (the error wraps a *RefusedError).
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("outbound: %w", err)
	}
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("outbound: unexpected address %q", address)
			}
			return p.Check(host, ap)
		}}
	return d.DialContext(ctx, network, addr)
}

// Transport is an HTTP transport whose connections p allows. It uses no
// proxy: through one, the address reached would be the proxy's, and the
// destination's could not be checked.
func (p *Policy) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           p.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Refused reports whether err is a refusal of p's.
func Refused(err error) bool {
	var re *RefusedError
	return errors.As(err, &re)
}
