package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/internal/testldap"
)

// TestLDAPCleartextRefusedUnlessInsecure: the lab's slapd reached over a
// plain ldap:// URL without StartTLS (passwords in clear, even on this
// machine) stops serve at start with a message naming the ways out;
// with --ldap-insecure it starts, says at start that passwords cross the
// network in clear, and people sign in.
func TestLDAPCleartextRefusedUnlessInsecure(t *testing.T) {
	t.Parallel()
	dir := testldap.Start(t, "../testdata/ldap/lab.ldif")
	pw := filepath.Join(t.TempDir(), "ldap-password")
	if err := os.WriteFile(pw, []byte(testldap.ServicePassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := []string{"--ldap-url", dir.URL, "--ldap-bind-dn", testldap.ServiceDN, "--ldap-bind-password-file", pw,
		"--ldap-user-base", "ou=people," + testldap.Base, "--ldap-group-base", "ou=groups," + testldap.Base,
		"--auth-map", "group:ml-vision -> team vision"}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"serve", "--dev", "--addr", "127.0.0.1:0", "--data", t.TempDir()}, plain...)...)
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("serve with a plain ldap:// URL: err %v (context %v), want it refused at start\n%s", err, ctx.Err(), out)
	}
	for _, want := range []string{dir.URL, "in clear", "ldaps://", "--ldap-start-tls", "--ldap-insecure"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}

	srv := startServer(t, append([]string{"--data", t.TempDir(), "--sim-gpus", "1x1x80", "--ldap-insecure"}, plain...)...)
	b := newBrowser(t, srv.URL)
	b.login("dave", "dave-secret")
	if _, body := b.get("/jobs"); whoOnPage(body) != "dave · researcher · vision" {
		t.Errorf("dave over cleartext LDAP: %q, want researcher of vision", whoOnPage(body))
	}
	warned := false
	for _, line := range strings.Split(srv.output(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "LDAP without TLS") && strings.Contains(line, dir.URL) {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning at start that LDAP passwords cross the network in clear:\n%s", srv.output())
	}
}
