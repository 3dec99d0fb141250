package ldapdir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"github.com/gpuportal/gpuportal/identity"
	"github.com/gpuportal/gpuportal/internal/testldap"
)

func labLDAP(url string) identity.LDAPConfig {
	return identity.LDAPConfig{URL: url, UserBase: "ou=people," + testldap.Base, UserFilter: "(&(objectClass=posixAccount)(uid={name}))",
		NameAttr: "uid", UnixAttr: "uid", GroupBase: "ou=groups," + testldap.Base,
		GroupFilter: "(|(member={dn})(memberUid={name}))", GroupAttr: "cn", Timeout: identity.Duration(5 * time.Second),
		BindDN: testldap.ServiceDN}.WithBindPassword(testldap.ServicePassword)
}

// TestLDAP signs in against a real slapd loaded with testdata/ldap: over
// plain LDAP, StartTLS and LDAPS with the lab's CA, as the service account
// or anonymously; wrong passwords, unknown names and empty passwords are
// refused; a certificate from another CA is an unavailable directory; a
// group change in the directory shows at the next sign-in.
func TestLDAP(t *testing.T) {
	srv := testldap.Start(t, "../../testdata/ldap/lab.ldif")
	otherCA := filepath.Join(t.TempDir(), "other.pem")
	if err := os.WriteFile(otherCA, []byte(otherCAPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		cfg      func(c *identity.LDAPConfig)
		user, pw string
		groups   []string
		err      error
	}{
		{"plain, service account", func(c *identity.LDAPConfig) {}, "dave", "dave-secret", []string{"ml-vision"}, nil},
		{"anonymous search", func(c *identity.LDAPConfig) { *c = c.WithBindPassword(""); c.BindDN = "" }, "erin", "erin-secret", []string{"ml-vision", "ml-nlp", "vision-leads"}, nil},
		{"StartTLS with the lab's CA", func(c *identity.LDAPConfig) { c.StartTLS, c.CAFile = true, srv.CAFile }, "dave", "dave-secret", []string{"ml-vision"}, nil},
		{"LDAPS with the lab's CA", func(c *identity.LDAPConfig) { c.URL, c.CAFile = srv.TLSURL, srv.CAFile }, "frank", "frank-secret", []string{"gpu-admins"}, nil},
		{"no groups", func(c *identity.LDAPConfig) {}, "gina", "gina-secret", nil, nil},
		{"wrong password", func(c *identity.LDAPConfig) {}, "dave", "erin-secret", nil, identity.ErrBadCredentials},
		{"unknown name", func(c *identity.LDAPConfig) {}, "zoe", "dave-secret", nil, identity.ErrBadCredentials},
		{"empty password is no anonymous bind", func(c *identity.LDAPConfig) {}, "dave", "", nil, identity.ErrBadCredentials},
		{"filter injection", func(c *identity.LDAPConfig) {}, "*", "dave-secret", nil, identity.ErrBadCredentials},
		{"LDAPS with another CA", func(c *identity.LDAPConfig) { c.URL, c.CAFile = srv.TLSURL, otherCA }, "dave", "dave-secret", nil, identity.ErrUnavailable},
		{"wrong service password", func(c *identity.LDAPConfig) { *c = c.WithBindPassword("nope") }, "dave", "dave-secret", nil, identity.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := labLDAP(srv.URL)
			tc.cfg(&cfg)
			l, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			c, err := l.Authenticate(ctx, tc.user, tc.pw)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			slices.Sort(c.Groups)
			slices.Sort(tc.groups)
			want := "uid=" + tc.user + ",ou=people," + testldap.Base
			if c.Name != tc.user || c.UnixName != tc.user || c.Subject != want || c.Source != "ldap" || !slices.Equal(c.Groups, tc.groups) {
				t.Errorf("claims %+v, want %s in %v", c, want, tc.groups)
			}
		})
	}

	t.Run("lookup between sign-ins", func(t *testing.T) {
		l, err := New(labLDAP(srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		c, found, err := l.Lookup(ctx, "uid=erin,ou=people,"+testldap.Base)
		slices.Sort(c.Groups)
		if err != nil || !found || c.Name != "erin" || !slices.Equal(c.Groups, []string{"ml-nlp", "ml-vision", "vision-leads"}) {
			t.Errorf("erin: %+v, %v, %v", c, found, err)
		}
		for _, dn := range []string{"uid=zoe,ou=people," + testldap.Base, "cn=ml-nlp,ou=groups," + testldap.Base} {
			if _, found, err := l.Lookup(ctx, dn); found || err != nil {
				t.Errorf("%s: found %v, %v; want not found", dn, found, err)
			}
		}
	})

	t.Run("group change shows at the next sign-in", func(t *testing.T) {
		l, err := New(labLDAP(srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		conn, err := ldap.DialURL(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.Bind(testldap.Admin, testldap.AdminPassword); err != nil {
			t.Fatal(err)
		}
		add := ldap.NewModifyRequest("cn=ml-nlp,ou=groups,"+testldap.Base, nil)
		add.Add("memberUid", []string{"dave"})
		if err := conn.Modify(add); err != nil {
			t.Fatal(err)
		}
		c, err := l.Authenticate(ctx, "dave", "dave-secret")
		if err != nil || !slices.Contains(c.Groups, "ml-nlp") {
			t.Errorf("after the change: %v, %v", c.Groups, err)
		}
	})
}

// otherCAPEM is a CA that signed nothing of the test's.
const otherCAPEM = `-----BEGIN CERTIFICATE-----
MIIBhTCCASugAwIBAgIQIRi6zePL6mKjOipn+dNuaTAKBggqhkjOPQQDAjASMRAw
DgYDVQQKEwdBY21lIENvMB4XDTE3MTAyMDE5NDMwNloXDTE4MTAyMDE5NDMwNlow
EjEQMA4GA1UEChMHQWNtZSBDbzBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABD0d
7VNhbWvZLWPuj/RtHFjvtJBEwOkhbN/BnnE8rnZR8+sbwnc/KhCk3FhnpHZnQz7B
5aETbbIgmuvewdjvSBSjYzBhMA4GA1UdDwEB/wQEAwICpDATBgNVHSUEDDAKBggr
BgEFBQcDATAPBgNVHRMBAf8EBTADAQH/MCkGA1UdEQQiMCCCDmxvY2FsaG9zdDo1
NDUzgg4xMjcuMC4wLjE6NTQ1MzAKBggqhkjOPQQDAgNIADBFAiEA2zpJEPQyz6/l
Wf86aX6PepsntZv2GYlA5UpabfT2EZICICpJ5h/iI+i341gBmLiAFQOyTDT+/wQc
6MF9+Yw1Yy0t
-----END CERTIFICATE-----
`
