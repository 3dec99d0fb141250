// Package integration tests gpuportal end to end: the real binary, a real
// database, its built-in agent, driven over HTTP as a browser and an API
// client would.
package integration

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the gpuportal binary built once for all tests.
var binary string

// parallelTests is how many tests that call t.Parallel run at once
// unless -parallel says otherwise. They spend their time waiting on the
// binary, its agents, Chromium and the clock (a demo watched for a minute,
// a notification's retry) rather than computing, so more of them than
// go test's default of one per CPU run on a machine of 2. Tests whose
// assertions lean on the machine keeping time (the fault tests' 2 s
// heartbeat timeout, a refresh expected within a second or two) and
// those that change the machine (useradd, Slurm, environment variables)
// do not call t.Parallel: go test runs them first, one at a time. The
// fault tests among them run side by side with each other only, as the
// subtests of TestFaults. At 4 the package took 638 s under -race on a
// quiet 2-core machine, the CPU idle for much of it; at 8, 469 s, both
// cores busy from the parallel tests' start (the slowest tests then took
// two to four times as long); 6 took 534 s in a whole run of
// scripts/test.
const parallelTests = 6

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", strconv.Itoa(parallelTests)); err != nil {
			fmt.Fprintln(os.Stderr, "set -test.parallel:", err)
			os.Exit(1)
		}
	}
	dir, err := os.MkdirTemp("", "gpuportal-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "gpuportal")
	if b := os.Getenv("GPUPORTAL_TEST_BINARY"); b != "" {
		// Another build, to compare with (by hand: the fault suite's
		// before and after).
		binary = b
	} else {
		// Stamped as a release build is (see the README): the version
		// tests expect testVersion.
		build := exec.Command("go", "build", "-ldflags", "-X github.com/gpuportal/gpuportal/core/buildinfo.version="+testVersion,
			"-o", binary, "../cmd/gpuportal")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build gpuportal:", err)
			os.Exit(1)
		}
	}
	// Every exchange with a server the tests start is checked against
	// web/openapi.json, whichever client makes it (contract_test.go).
	http.DefaultTransport = contractTransport{next: http.DefaultTransport, servers: checkedServers}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// listenLimit is how long a started server may take to listen: long
// enough for a fresh PostgreSQL database's every migration on a loaded
// 2-core machine (CI, where one took over 30 s beside the other
// packages' tests), short enough to name a server that hangs.
const listenLimit = 2 * time.Minute

// server is a running gpuportal serve.
type server struct {
	t    testing.TB
	URL  string
	cmd  *exec.Cmd
	done chan struct{}

	mu  sync.Mutex
	out strings.Builder // everything it printed
}

// startServer runs "gpuportal serve --dev" with args on a free port and
// waits until it listens. The server is stopped when t ends.
func startServer(t testing.TB, args ...string) *server {
	t.Helper()
	all := []string{"serve", "--dev", "--addr", "127.0.0.1:0", "--log-level", "debug"}
	if os.Geteuid() == 0 {
		all = append(all, "--run-as", "root") // jobs never run as root unless asked
	}
	all = append(all, args...)
	s := &server{t: t, cmd: exec.Command(binary, all...), done: make(chan struct{})}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start gpuportal: %v", err)
	}
	urls := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Add(2)
	go s.collect(&wg, stdout, urls)
	go s.collect(&wg, stderr, nil)
	go func() { wg.Wait(); _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	select {
	case s.URL = <-urls:
	case <-s.done:
		t.Fatalf("gpuportal exited before listening:\n%s", s.output())
	case <-time.After(listenLimit):
		t.Fatalf("gpuportal did not listen within %v:\n%s", listenLimit, s.output())
	}
	checkServer(t, s.URL)
	return s
}

func (s *server) collect(wg *sync.WaitGroup, r io.Reader, urls chan<- string) {
	defer wg.Done()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		s.mu.Lock()
		s.out.WriteString(line + "\n")
		s.mu.Unlock()
		if u, ok := strings.CutPrefix(line, "gpuportal listening on "); ok && urls != nil {
			urls <- u
		}
	}
}

func (s *server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// stop ends the server with SIGTERM, as an operator would, and waits.
func (s *server) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.t.Errorf("gpuportal did not stop within 30s of SIGTERM")
	}
	if s.t.Failed() {
		s.t.Logf("gpuportal output:\n%s", s.output())
	}
}

// kill ends the server with SIGKILL: a crash.
func (s *server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// eventually polls f until it returns true or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() bool) {
	t.Helper()
	if !poll(timeout, f) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// poll calls f every 100 ms until it returns true, for up to timeout,
// and reports whether it did.
func poll(timeout time.Duration, f func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !f() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}

// afterPasses waits until the engine of the server at base has run n
// more scheduling passes (gpuportal_scheduler_passes_total in /metrics).
// A test that checks that something did not happen (a job did not start,
// a forged exit changed nothing) waits for passes rather than seconds:
// the first pass counted may have begun before the event, so n of at
// least 3 leaves two whole passes that saw it, however busy the machine.
func afterPasses(t *testing.T, base string, n int) {
	t.Helper()
	const series = "gpuportal_scheduler_passes_total"
	from := scrape(t, base).get(series)
	eventually(t, 60*time.Second, fmt.Sprintf("%d more scheduling passes than %v", n, from), func() bool {
		return scrape(t, base).get(series) >= from+float64(n)
	})
}
