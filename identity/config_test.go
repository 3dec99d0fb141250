package identity

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rule
		err  string
	}{
		{"group:ml-vision -> team vision", Rule{Group: "ml-vision", Team: "vision"}, ""},
		{"group:gpu-admins -> admin", Rule{Group: "gpu-admins", Role: "admin"}, ""},
		{"  group:leads->lead ", Rule{Group: "leads", Role: "lead"}, ""},
		{"group:CN=GPU Users,OU=Groups -> team gpu", Rule{Group: "CN=GPU Users,OU=Groups", Team: "gpu"}, ""},
		{"ml-vision -> team vision", Rule{}, "want"},
		{"group: -> admin", Rule{}, "want"},
		{"group:x -> boss", Rule{}, "unknown role"},
		{"group:x -> team ", Rule{}, "team or a role"},
		{"group:x -> team a b", Rule{}, "no spaces"},
	} {
		got, err := ParseRule(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRule(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseRule(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestResolve(t *testing.T) {
	m := Mapping{Rules: []Rule{
		{Group: "ml-vision", Team: "vision"}, {Group: "ml-nlp", Team: "nlp"},
		{Group: "vision-leads", Role: "lead"}, {Group: "gpu-admins", Role: "admin"},
	}}
	for _, tc := range []struct {
		name       string
		groups     []string
		def        string
		role, team string
		noTeam     bool
	}{
		{"a team group", []string{"staff", "ml-nlp"}, "", "researcher", "nlp", false},
		{"the first rule's team wins", []string{"ml-nlp", "ml-vision"}, "", "researcher", "vision", false},
		{"the strongest role wins", []string{"gpu-admins", "vision-leads", "ml-vision"}, "", "admin", "vision", false},
		{"a lead needs a team", []string{"vision-leads"}, "", "", "", true},
		{"an admin needs none", []string{"gpu-admins"}, "", "admin", "", false},
		{"no group: refused", nil, "", "", "", true},
		{"no group: the default team", nil, "guests", "researcher", "guests", false},
		{"removed from a group: the team goes", []string{"staff"}, "", "", "", true},
	} {
		m.DefaultTeam = tc.def
		role, team, err := m.Resolve(tc.groups)
		if tc.noTeam != (err != nil) || role != tc.role || team != tc.team {
			t.Errorf("%s: Resolve(%v) = %q %q %v, want %q %q (refused %v)", tc.name, tc.groups, role, team, err, tc.role, tc.team, tc.noTeam)
		}
	}
}

// TestLoad: flags alone, a file alone, flags over a file, secrets from
// files, and each mistake named by its flag.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secret := write("secret", "s3cret\n")
	file := write("auth.json", `{
  "ldap": {"url": "ldaps://ldap.lab.example", "user_base": "ou=people,dc=lab,dc=example",
           "bind_dn": "cn=portal,dc=lab,dc=example", "bind_password_file": "`+secret+`"},
  "oidc": {"issuer": "https://sso.lab.example", "client_id": "portal", "client_secret_file": "`+secret+`",
           "redirect_url": "https://gpu.lab.example/login/oidc/callback", "name": "Lab SSO"},
  "map": ["group:ml-vision -> team vision"],
  "session_ttl": "4h"
}`)
	bad := write("bad.json", `{"ldap": {"uri": "x"}}`)
	load := func(args ...string) (Config, error) {
		var f Flags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.Register(fs)
		if err := fs.Parse(args); err != nil {
			return Config{}, err
		}
		return f.Load()
	}
	c, err := load()
	if err != nil || c.LDAP.Enabled() || c.OIDC.Enabled() {
		t.Fatalf("no flags: %+v, %v", c, err)
	}
	c, err = load("--auth-config", file, "--oidc-name", "Campus", "--auth-map", "group:admins -> admin")
	if err != nil {
		t.Fatal(err)
	}
	if c.OIDC.Name != "Campus" || c.OIDC.ClientID != "portal" || c.OIDC.clientSecret != "s3cret" || c.LDAP.bindPassword != "s3cret" ||
		c.LDAP.GroupBase != "dc=lab,dc=example" || c.LDAP.UserFilter == "" || c.SessionTTL.String() != "4h0m0s" ||
		len(c.Mapping.Rules) != 2 || c.Mapping.Rules[1].Role != "admin" {
		t.Errorf("file and flags: %+v", c)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ldap-url", "ldap.lab.example", "--auth-default-team", "x"}, "--ldap-url"},
		{[]string{"--ldap-url", "ldap://h", "--ldap-start-tls", "--auth-default-team", "x"}, "--ldap-user-base"},
		{[]string{"--ldap-url", "ldap://ldap.lab.example", "--ldap-user-base", "o=x", "--auth-default-team", "x"}, "in clear"},
		{[]string{"--oidc-issuer", "http://sso.lab.example", "--oidc-client-id", "c", "--oidc-redirect-url", "https://p/login/oidc/callback", "--auth-default-team", "x"}, "--oidc-issuer"},
		{[]string{"--ldap-url", "ldaps://h", "--ldap-start-tls", "--ldap-user-base", "o=x", "--auth-default-team", "x"}, "--ldap-start-tls"},
		{[]string{"--ldap-url", "ldap://127.0.0.1", "--ldap-user-base", "o=x", "--auth-default-team", "x"}, "--ldap-insecure"},
		{[]string{"--ldap-url", "ldaps://h", "--ldap-insecure", "--ldap-user-base", "o=x", "--auth-default-team", "x"}, "--ldap-insecure"},
		{[]string{"--ldap-url", "ldap://h", "--ldap-start-tls", "--ldap-insecure", "--ldap-user-base", "o=x", "--auth-default-team", "x"}, "--ldap-insecure"},
		{[]string{"--ldap-url", "ldap://127.0.0.1", "--ldap-start-tls", "--ldap-user-base", "o=x", "--ldap-bind-dn", "cn=x", "--auth-default-team", "x"}, "--ldap-bind-password-file"},
		{[]string{"--ldap-url", "ldap://127.0.0.1", "--ldap-start-tls", "--ldap-user-base", "o=x", "--ldap-ca-file", secret, "--auth-default-team", "x"}, "--ldap-ca-file"},
		{[]string{"--ldap-url", "ldaps://h", "--ldap-user-base", "o=x"}, "--auth-map"},
		{[]string{"--oidc-issuer", "https://i", "--auth-default-team", "x"}, "--oidc-client-id"},
		{[]string{"--oidc-issuer", "https://i", "--oidc-client-id", "c", "--oidc-redirect-url", "https://p/cb", "--auth-default-team", "x"}, "--oidc-redirect-url"},
		{[]string{"--auth-map", "vision"}, "--auth-map"},
		{[]string{"--auth-config", bad}, "--auth-config"},
		{[]string{"--auth-config", filepath.Join(dir, "none.json")}, "--auth-config"},
		{[]string{"--sso-session-ttl", "-1h"}, "sso-session-ttl"},
		{[]string{"--sso-session-ttl", "0s", "--auth-default-team", "x", "--ldap-url", "ldaps://h", "--ldap-user-base", "o=x"}, "--sso-session-ttl"},
		{[]string{"--ldap-sync-interval", "10ms", "--auth-default-team", "x", "--ldap-url", "ldaps://h", "--ldap-user-base", "o=x"}, "--ldap-sync-interval"},
	} {
		if _, err := load(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want it to name %s", tc.args, err, tc.want)
		}
	}
}

// TestLDAPCleartext: a plain ldap:// URL without StartTLS, on this
// machine or another, is refused unless --ldap-insecure allows it (and
// then reported as cleartext, for the server's warning); TLS from the
// start or by StartTLS is never cleartext.
func TestLDAPCleartext(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		refused   bool
		cleartext bool
	}{
		{[]string{"--ldap-url", "ldap://ldap.lab.example"}, true, false},
		{[]string{"--ldap-url", "ldap://127.0.0.1:389"}, true, false},
		{[]string{"--ldap-url", "ldap://localhost"}, true, false},
		{[]string{"--ldap-url", "ldap://ldap.lab.example", "--ldap-insecure"}, false, true},
		{[]string{"--ldap-url", "ldap://127.0.0.1:389", "--ldap-insecure"}, false, true},
		{[]string{"--ldap-url", "ldap://ldap.lab.example", "--ldap-start-tls"}, false, false},
		{[]string{"--ldap-url", "ldaps://ldap.lab.example"}, false, false},
	} {
		var f Flags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.Register(fs)
		if err := fs.Parse(append(tc.args, "--ldap-user-base", "o=x", "--auth-default-team", "x")); err != nil {
			t.Fatal(err)
		}
		c, err := f.Load()
		if refused := err != nil; refused != tc.refused {
			t.Errorf("%v: err = %v, want refused %v", tc.args, err, tc.refused)
			continue
		}
		if tc.refused && !strings.Contains(err.Error(), "in clear") {
			t.Errorf("%v: %v does not say why", tc.args, err)
		}
		if err == nil && c.LDAP.Cleartext() != tc.cleartext {
			t.Errorf("%v: Cleartext() = %v, want %v", tc.args, c.LDAP.Cleartext(), tc.cleartext)
		}
	}
}
