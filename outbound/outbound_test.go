package outbound

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestKind: every kind of address that is not the Internet's is named,
// IPv4 inside IPv6 included; Internet addresses are "".
func TestKind(t *testing.T) {
	for _, c := range []struct {
		addr, want string
	}{
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fd00::1", "private"},
		{"fc00::1", "private"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", "reserved (this network)"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"100.64.0.1", "shared (carrier-grade NAT)"},
		{"100.127.255.255", "shared (carrier-grade NAT)"},
		{"64:ff9b::7f00:1", "loopback"},      // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", "link-local"}, // NAT64 of 169.254.169.254
		{"2002:a00:1::1", "private"},         // 6to4 of 10.0.0.1
		{"::127.0.0.1", "reserved (IPv4-compatible)"},
		{"198.18.0.1", "reserved (benchmarking)"},
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"172.32.0.1", ""},
		{"2606:4700:4700::1111", ""},
		{"64:ff9b::808:808", ""}, // NAT64 of 8.8.8.8
	} {
		t.Run(c.addr, func(t *testing.T) {
			if got := Kind(netip.MustParseAddr(c.addr)); got != c.want {
				t.Errorf("Kind(%s) = %q; want %q", c.addr, got, c.want)
			}
		})
	}
}

// TestParse: the allow list's entries, and the errors that name the
// entry at fault.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		list, want, err string
	}{
		{"", "none", ""},
		{" , ", "none", ""},
		{"10.0.0.0/8", "10.0.0.0/8", ""},
		{"10.1.2.3/8", "10.0.0.0/8", ""},
		{"fd00::/8", "fd00::/8", ""},
		{"127.0.0.1", "127.0.0.1", ""},
		{"127.0.0.1:9000, [::1]:9000", "127.0.0.1:9000,[::1]:9000", ""},
		{"::1", "::1", ""},
		{"::ffff:10.0.0.1", "10.0.0.1", ""},
		{"Hooks.Lab.Internal.", "hooks.lab.internal", ""},
		{"hooks.lab.internal:443", "hooks.lab.internal:443", ""},
		{"10.0.0.0/33", "", `"10.0.0.0/33": not a CIDR`},
		{"10.0.0.1:0", "", `"10.0.0.1:0": port "0"`},
		{"10.0.0.1:http", "", `"10.0.0.1:http": port "http"`},
		{"hooks.lab:99999", "", `port "99999"`},
		{"http://hooks.lab", "", `"http://hooks.lab": a URL`},
		{"fe80::1%eth0", "", "zone"},
		{"a..b", "", "not an address"},
		{"-bad.example", "", "not an address"},
	} {
		t.Run(c.list, func(t *testing.T) {
			p, err := Parse(c.list)
			switch {
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("error %v; want one saying %s", err, c.err)
			case c.err == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.err == "" && p.String() != c.want:
				t.Errorf("parsed as %q; want %q", p.String(), c.want)
			}
		})
	}
}

// TestCheck: what a policy allows and refuses, by address, name and port,
// the server's own addresses included.
func TestCheck(t *testing.T) {
	own := netip.MustParseAddrPort("127.0.0.1:8080")
	mustParse := func(list string) *Policy {
		p, err := Parse(list)
		if err != nil {
			t.Fatal(err)
		}
		return p.WithOwn(own)
	}
	none := mustParse("")
	for _, c := range []struct {
		name   string
		p      *Policy
		host   string
		addr   string
		refuse string // the kind; "" when allowed
	}{
		{"an Internet address", none, "", "93.184.215.14:443", ""},
		{"the nil policy allows the Internet", nil, "", "93.184.215.14:443", ""},
		{"the nil policy refuses loopback", nil, "", "127.0.0.1:5432", "loopback"},
		{"loopback", none, "", "127.0.0.1:5432", "loopback"},
		{"loopback by name", none, "db.internal", "127.0.0.1:5432", "loopback"},
		{"IPv4-mapped loopback", none, "", "[::ffff:127.0.0.1]:5432", "loopback"},
		{"the metadata service", none, "", "169.254.169.254:80", "link-local"},
		{"a private address", none, "", "10.0.0.5:80", "private"},
		{"the server itself", none, "", "127.0.0.1:8080", "own"},
		{"a CIDR allows its addresses", mustParse("10.0.0.0/8"), "", "10.9.9.9:80", ""},
		{"a CIDR allows no other", mustParse("10.0.0.0/8"), "", "192.168.0.1:80", "private"},
		{"an address allows every port", mustParse("127.0.0.1"), "", "127.0.0.1:9000", ""},
		{"an address does not allow the server's own port", mustParse("127.0.0.1"), "", "127.0.0.1:8080", "own"},
		{"a CIDR does not allow the server's own port", mustParse("127.0.0.0/8"), "", "127.0.0.1:8080", "own"},
		{"an address and the server's port allow it", mustParse("127.0.0.1:8080"), "", "127.0.0.1:8080", ""},
		{"an address and port allow that port", mustParse("127.0.0.1:9000"), "", "127.0.0.1:9000", ""},
		{"an address and port allow no other port", mustParse("127.0.0.1:9000"), "", "127.0.0.1:5432", "loopback"},
		{"a name allows what it resolves to", mustParse("hooks.lab.internal"), "hooks.lab.internal", "10.1.1.1:443", ""},
		{"a name matches without case or final dot", mustParse("hooks.lab.internal"), "HOOKS.lab.internal.", "10.1.1.1:443", ""},
		{"a name allows nothing to another name", mustParse("hooks.lab.internal"), "evil.example", "10.1.1.1:443", "private"},
		{"a name allows nothing to a bare address", mustParse("hooks.lab.internal"), "10.1.1.1", "10.1.1.1:443", "private"},
		{"a name with a port allows that port", mustParse("hooks.lab.internal:8443"), "hooks.lab.internal", "10.1.1.1:8443", ""},
		{"a name with a port allows no other", mustParse("hooks.lab.internal:8443"), "hooks.lab.internal", "10.1.1.1:22", "private"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.p.Check(c.host, netip.MustParseAddrPort(c.addr))
			var re *RefusedError
			switch {
			case c.refuse == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.refuse != "" && !errors.As(err, &re):
				t.Errorf("allowed; want refused as %s", c.refuse)
			case c.refuse != "" && re.Kind != c.refuse:
				t.Errorf("refused as %q (%v); want %q", re.Kind, err, c.refuse)
			}
		})
	}
}

// TestCheckURL: a URL whose host is a refused address, or localhost, is
// refused before it is saved; names are left to the connection.
func TestCheckURL(t *testing.T) {
	p, err := Parse("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	p = p.WithOwn(netip.MustParseAddrPort("203.0.113.7:443"))
	for _, c := range []struct {
		url, want string
	}{
		{"https://hooks.slack.com/services/T/B/X", ""},
		{"http://93.184.215.14/hook", ""},
		{"http://10.2.3.4:9000/hook", ""},
		{"http://127.0.0.1:5432/", "127.0.0.1 is a loopback address"},
		{"http://[::1]/", "::1 is a loopback address"},
		{"http://[::ffff:169.254.169.254]/latest/meta-data", "169.254.169.254 is a link-local address"},
		{"http://169.254.169.254/latest/meta-data", "link-local"},
		{"http://0.0.0.0:8080/", "unspecified"},
		{"http://192.168.1.1/", "private"},
		{"http://localhost:8080/", "localhost (127.0.0.1) is a loopback address"},
		{"http://api.LOCALHOST/", "loopback"},
		{"https://203.0.113.7/", "this server's own address"},
		{"http://203.0.113.7/", "documentation"},
		{"not a url at all", ""}, // the URL's own check says why
	} {
		t.Run(c.url, func(t *testing.T) {
			err := p.CheckURL(c.url)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v; want one saying %q", err, c.want)
			}
		})
	}
	allowed, _ := Parse("127.0.0.1")
	if err := allowed.CheckURL("http://localhost:9000/"); err != nil {
		t.Errorf("localhost where 127.0.0.1 is allowed: %v", err)
	}
}

// TestTransportNeverDials: a request to a refused address fails without
// a connection reaching the listener, whether named by address, by a
// name that resolves to it, or reached through a redirect; the allowed
// one is delivered.
func TestTransportNeverDials(t *testing.T) {
	var conns, otherConns atomic.Int64
	counting := func(n *atomic.Int64, h http.HandlerFunc) *httptest.Server {
		srv := httptest.NewUnstartedServer(h)
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				n.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		return srv
	}
	other := counting(&otherConns, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := counting(&conns, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, other.URL+"/", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	get := func(p *Policy, url string) error {
		cl := &http.Client{Transport: p.Transport(), Timeout: 5 * time.Second}
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cl.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, url := range []string{"http://127.0.0.1:" + port + "/", "http://localhost:" + port + "/"} {
		if err := get(nil, url); !Refused(err) {
			t.Errorf("%s: %v; want a refusal", url, err)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the listener saw %d connections to refused addresses", n)
	}
	allowed, err := Parse("127.0.0.1:" + port)
	if err != nil {
		t.Fatal(err)
	}
	if err := get(allowed, "http://127.0.0.1:"+port+"/"); err != nil {
		t.Fatalf("the allowed address: %v", err)
	}
	// A redirect to a refused address is refused before it connects.
	if err := get(allowed, "http://127.0.0.1:"+port+"/redirect"); !Refused(err) {
		t.Errorf("a redirect to a refused address: %v; want a refusal", err)
	}
	if n := otherConns.Load(); n != 0 {
		t.Errorf("the redirect's target saw %d connections", n)
	}
}
