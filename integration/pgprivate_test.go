package integration

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
)

// privatePG is a PostgreSQL server of the test's own, so that a test may
// stop it (never the shared one at 127.0.0.1:5432).
type privatePG struct {
	t    *testing.T
	bin  string // the server's bin folder
	dir  string // its data folder
	port int
	cred *syscall.Credential
}

// startPrivatePG creates a cluster in a temporary folder with trust
// authentication and a database named test, and starts it on a free port.
// It runs as the postgres user when the test runs as root, as the server
// refuses root. It fails under CI=true when PostgreSQL is not installed
// (scripts/ensure-postgres installs it), and skips, saying why, elsewhere.
func startPrivatePG(t *testing.T) *privatePG {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		msg := "no PostgreSQL server binaries in /usr/lib/postgresql (./scripts/ensure-postgres installs them)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	sort.Strings(bins)
	pg := &privatePG{t: t, bin: filepath.Dir(bins[len(bins)-1]), port: freePort(t)}
	parent := t.TempDir()
	pg.dir = filepath.Join(parent, "pgdata")
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("PostgreSQL refuses to run as root and there is no postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// The temporary folders above it must let postgres through.
		for d := parent; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
			_ = os.Chmod(d, 0o755)
		}
		if err := os.Chown(parent, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	pg.run("initdb", "-D", pg.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	pg.start()
	t.Cleanup(func() { _ = pg.ctl("stop", "-m", "immediate") })
	pg.run("createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.port), "-U", "postgres", "test")
	return pg
}

// DSN is the test database's URL.
func (pg *privatePG) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", pg.port)
}

func (pg *privatePG) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(pg.bin, name), args...)
	cmd.Dir = "/"
	if pg.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	}
	return cmd
}

func (pg *privatePG) run(name string, args ...string) {
	pg.t.Helper()
	if out, err := pg.command(name, args...).CombinedOutput(); err != nil {
		pg.t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

func (pg *privatePG) ctl(args ...string) error {
	all := append([]string{"-D", pg.dir, "-w", "-o", fmt.Sprintf("-p %d -h 127.0.0.1 -k %s", pg.port, pg.dir),
		"-l", filepath.Join(pg.dir, "server.log")}, args...)
	out, err := pg.command("pg_ctl", all...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %v: %w\n%s", args, err, out)
	}
	return nil
}

func (pg *privatePG) start() {
	pg.t.Helper()
	if err := pg.ctl("start"); err != nil {
		pg.t.Fatal(err)
	}
}

// stop stops the server at once, as a crash of its machine would.
func (pg *privatePG) stop() {
	pg.t.Helper()
	if err := pg.ctl("stop", "-m", "immediate"); err != nil {
		pg.t.Fatal(err)
	}
}
