// Package testpodman is for tests that run containers with Podman as root:
// the tests' Podman configuration (testdata/podman/containers.conf) and a
// small image built without a registry. scripts/ensure-podman installs
// Podman, runc and Debian's static busybox; without them (or without
// root) a test is skipped, or fails under CI=true.
package testpodman

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Busybox is Debian's static busybox (busybox-static).
const Busybox = "/usr/bin/busybox"

// Applets are the busybox programs the image has in /bin.
var Applets = []string{"sh", "id", "env", "sleep", "echo", "cat", "ls", "true", "printf", "ps",
	"setsid", "cut", "httpd", "nc", "readlink", "grep"}

// Need fails under CI, and skips elsewhere, unless the test runs as root
// with Podman and a static busybox here. It returns the path of the
// tests' Podman configuration, for CONTAINERS_CONF.
func Need(t testing.TB) string {
	t.Helper()
	err := error(nil)
	if os.Geteuid() != 0 {
		err = fmt.Errorf("the tests run Podman as root")
	} else if _, err = exec.LookPath("podman"); err == nil {
		_, err = os.Stat(Busybox)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("container tests need root, Podman and a static busybox (scripts/ensure-podman): %v", err)
		}
		t.Skipf("needs root, Podman and a static busybox (scripts/ensure-podman): %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	conf, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", "testdata", "podman", "containers.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// Podman runs podman with the configuration conf and returns its output.
func Podman(t testing.TB, conf string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("podman", args...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+conf)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// setpgidSource is /bin/setpgid of the image: setpgid PROG ARGS... runs
// PROG in a process group of its own, as a shell cannot without a
// terminal.
const setpgidSource = `package main

import (
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 2 || syscall.Setpgid(0, 0) != nil {
		os.Exit(126)
	}
	path, err := exec.LookPath(os.Args[1])
	if err != nil {
		os.Exit(127)
	}
	_ = syscall.Exec(path, os.Args[1:], os.Environ())
	os.Exit(126)
}
`

// Image makes sure the tests' image exists in Podman's storage (never
// pulled) and returns its name: a root file system of the machine's
// static busybox with Applets, and /bin/setpgid (setpgidSource, built
// static). The tag is a hash of its files, so later runs find it built.
// imagePath is the test image's PATH, as a Debian image's (whose
// /usr/local/bin is where the agent mounts srun); only /bin has files.
const imagePath = "/usr/local/bin:/usr/bin:/bin"

func Image(t testing.TB, conf string) string {
	t.Helper()
	bb, err := os.ReadFile(Busybox)
	if err != nil {
		t.Fatal(err)
	}
	setpgid := buildSetpgid(t)
	sum := sha256.New()
	for _, b := range [][]byte{bb, []byte(strings.Join(Applets, ",")), setpgid, []byte(imagePath)} {
		fmt.Fprintf(sum, "%d:", len(b))
		sum.Write(b)
	}
	name := "localhost/gpuportal-test-busybox:" + hex.EncodeToString(sum.Sum(nil)[:6])
	if _, err := Podman(t, conf, "image", "exists", name); err == nil {
		return name
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) {
		h.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin", "etc", "tmp", "proc", "sys", "dev"} {
		add(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	}
	add(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))}, bb)
	add(&tar.Header{Name: "bin/setpgid", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(setpgid))}, setpgid)
	for _, app := range Applets {
		add(&tar.Header{Name: "bin/" + app, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777}, nil)
	}
	for file, body := range map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n"} {
		add(&tar.Header{Name: file, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}, []byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := os.WriteFile(tarball, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Podman(t, conf, "import", "--change", `CMD ["/bin/sh"]`, "--change", "ENV PATH="+imagePath, tarball, name); err != nil {
		t.Fatalf("import the test image: %v", err)
	}
	return name
}

// buildSetpgid builds setpgidSource, static, reproducibly.
func buildSetpgid(t testing.TB) []byte {
	t.Helper()
	dir := t.TempDir()
	for file, body := range map[string]string{"main.go": setpgidSource, "go.mod": "module setpgid\n\ngo 1.22\n"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w -buildid=", "-o", "setpgid", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the image's setpgid: %v: %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "setpgid"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
