// Package testldap starts OpenLDAP's slapd for tests: its own process on
// free ports (ldap:// with StartTLS, and ldaps://), a temporary
// configuration and database loaded from an LDIF file, and a certificate
// signed by a CA made for the test. Debian's slapd is installed by
// scripts/ensure-slapd; without it a test is skipped, or fails under
// CI=true.
package testldap

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Base, Admin and AdminPassword are the directory's suffix and its root
// account (for tests that change the directory); ServiceDN and
// ServicePassword the portal's service account of testdata/ldap/lab.ldif.
const (
	Base            = "dc=lab,dc=example"
	Admin           = "cn=admin,dc=lab,dc=example"
	AdminPassword   = "admin-secret"
	ServiceDN       = "cn=gpuportal,ou=services,dc=lab,dc=example"
	ServicePassword = "servicepw"
)

// Server is a running slapd.
type Server struct {
	// URL is ldap://127.0.0.1:PORT (StartTLS offered), TLSURL
	// ldaps://localhost:PORT; CAFile holds the CA of their certificate
	// (for localhost and 127.0.0.1).
	URL, TLSURL, CAFile string
}

const slapd = "/usr/sbin/slapd"

// Start runs slapd with the entries of ldif until t ends.
func Start(t testing.TB, ldif string) *Server {
	t.Helper()
	if _, err := os.Stat(slapd); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no %s: LDAP tests need it in CI (scripts/ensure-slapd)", slapd)
		}
		t.Skipf("no %s: run scripts/ensure-slapd", slapd)
	}
	dir := t.TempDir()
	ca, err := writeCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "db"), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "slapd.conf")
	if err := os.WriteFile(conf, []byte(config(dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/usr/sbin/slapadd", "-q", "-f", conf, "-l", ldif).CombinedOutput(); err != nil {
		t.Fatalf("slapadd %s: %v\n%s", ldif, err, out)
	}
	port, tlsPort := freePort(t), freePort(t)
	s := &Server{URL: "ldap://127.0.0.1:" + port, TLSURL: "ldaps://localhost:" + tlsPort, CAFile: ca}
	var out bytes.Buffer
	// -d 0: stay in the foreground, logging nothing but errors.
	cmd := exec.Command(slapd, "-f", conf, "-h", s.URL+"/ "+s.TLSURL+"/", "-d", "0")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start slapd: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	deadline := time.Now().Add(15 * time.Second)
	for _, p := range []string{port, tlsPort} {
		for {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+p, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case err := <-done:
				t.Fatalf("slapd exited: %v\n%s", err, out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("slapd did not listen on %s within 15s\n%s", p, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return s
}

func config(dir string) string {
	return fmt.Sprintf(`include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile %[1]s/slapd.pid
argsfile %[1]s/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
TLSCACertificateFile %[1]s/ca.pem
TLSCertificateFile %[1]s/server.pem
TLSCertificateKeyFile %[1]s/server.key
database mdb
maxsize 16777216
suffix "%[2]s"
rootdn "%[3]s"
rootpw %[4]s
directory %[1]s/db
access to attrs=userPassword by self write by anonymous auth by * none
access to * by * read
`, dir, Base, Admin, AdminPassword)
}

func freePort(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// writeCerts makes a CA and a certificate for localhost and 127.0.0.1
// signed by it, in dir; it returns the CA's file.
func writeCerts(dir string) (string, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test lab CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", err
	}
	files := map[string][]byte{
		"ca.pem":     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"server.pem": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"server.key": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "ca.pem"), nil
}
