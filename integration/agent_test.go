package integration

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const agentToken = "it-agent-token"

// startAgent runs "gpuportal agent" with one simulated 2-GPU machine
// named name, connected to serverURL, until t ends; extra flags follow
// (a later --gpus wins). It reuses server's plumbing for a child process:
// its output, stop and kill.
func startAgent(t *testing.T, serverURL, name string, extra ...string) *server {
	t.Helper()
	return startAgentWithToken(t, serverURL, name, agentToken, extra...)
}

// startAgentWithToken is startAgent with another join token.
func startAgentWithToken(t *testing.T, serverURL, name, token string, extra ...string) *server {
	t.Helper()
	args := []string{"agent", "--server", serverURL, "--name", name, "--gpus", "sim:1x2x80",
		"--work-dir", t.TempDir(), "--grace", "1s", "--log-level", "debug"}
	args = append(args, extra...)
	if os.Geteuid() == 0 && !slices.ContainsFunc(extra, func(a string) bool { return strings.HasPrefix(a, "--run-as") }) {
		args = append(args, "--run-as", "root") // jobs never run as root unless asked
	}
	a := &server{t: t, URL: serverURL, cmd: exec.Command(binary, args...), done: make(chan struct{})}
	// The token travels in the environment, as operators should pass it.
	a.cmd.Env = append(os.Environ(), "GPUPORTAL_AGENT_TOKEN="+token)
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := a.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start gpuportal agent: %v", err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go a.collect(&wg, stdout, nil)
	go a.collect(&wg, stderr, nil)
	go func() { wg.Wait(); _ = a.cmd.Wait(); close(a.done) }()
	t.Cleanup(a.stop)
	return a
}

// startAgentServer runs a server without machines of its own that
// accepts remote agents, with a short heartbeat timeout.
func startAgentServer(t *testing.T, args ...string) *server {
	t.Helper()
	all := append([]string{"--no-local-agent", "--agent-token", agentToken}, args...)
	return startServer(t, all...)
}

// startAgentServerAt starts a server for remote agents on the address of
// old, which has stopped (a restart): its agents reconnect to the same URL.
func startAgentServerAt(t *testing.T, old *server, args ...string) *server {
	t.Helper()
	u, err := url.Parse(old.URL)
	if err != nil {
		t.Fatal(err)
	}
	return startAgentServer(t, append(args, "--addr", u.Host)...)
}

// connectedGPUs counts the GPUs of the machines connected to the server.
func connectedGPUs(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "gpuportal_gpus{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			n += int(v)
		}
	}
	return n
}

func waitGPUs(t *testing.T, base string, want int) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%d GPUs to connect", want), func() bool { return connectedGPUs(t, base) == want })
}

// metricsText is the server's /metrics page, or "" when unreachable.
func metricsText(t testing.TB, base string) string {
	t.Helper()
	return metricsTextWith(t, base, "")
}

// metricsTextWith is metricsText asked for with a bearer token (serve
// --metrics-token-file), when not "".
func metricsTextWith(t testing.TB, base, token string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// jobPage is a job's page, as a logged-in user sees it.
func jobPage(t *testing.T, base string, id int64) string {
	t.Helper()
	b := newBrowser(t, base)
	b.login("alice", "dev")
	_, page := b.get(fmt.Sprintf("/jobs/%d", id))
	return page
}

// remoteOutput is the output of a job on a remote machine, as the server
// keeps it in its data folder.
func remoteOutput(data, node string, id int64) string {
	b, _ := os.ReadFile(filepath.Join(data, "agents", node, "jobs", strconv.FormatInt(id, 10), "output.log"))
	return string(b)
}

func submit(t *testing.T, a *api, body map[string]any) int64 {
	t.Helper()
	var j jobView
	if st := a.do(http.MethodPost, "/api/v1/jobs", body, &j); st != http.StatusCreated {
		t.Fatalf("submit %v: status %d", body["name"], st)
	}
	return j.ID
}

// TestRemoteAgentRunsCommandJobs runs jobs on a separate agent process
// that connected to the server over its websocket.
func TestRemoteAgentRunsCommandJobs(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--max-retries", "0")
	startAgent(t, srv.URL, "remote-a")
	waitGPUs(t, srv.URL, 2)
	eventually(t, 30*time.Second, "remote-a's heartbeat in /metrics", func() bool {
		return strings.Contains(metricsText(t, srv.URL), `gpuportal_agent_heartbeat_age_seconds{node="remote-a"}`)
	})
	alice := newAPI(t, srv.URL, "alice", "dev")

	ok := submit(t, alice, map[string]any{"name": "hello", "gpus": 2, "command": []string{"sh", "-c",
		`echo "remote hello on $CUDA_VISIBLE_DEVICES"; test -d "$GPUPORTAL_CHECKPOINT_DIR" && echo "checkpoint: $GPUPORTAL_CHECKPOINT_DIR"`}})
	bad := submit(t, alice, map[string]any{"name": "fails", "gpus": 1, "command": "sh -c 'echo about to fail; exit 3'"})

	j := alice.waitState(ok, 30*time.Second, "succeeded", "failed")
	if j.State != "succeeded" || j.ExitCode == nil || *j.ExitCode != 0 || len(j.Placement) != 2 || !strings.HasPrefix(j.Placement[0], "remote-a:") {
		t.Errorf("job = %+v; want it succeeded on remote-a", j)
	}
	if page := jobPage(t, srv.URL, ok); !strings.Contains(page, "remote hello on 0,1") {
		t.Errorf("job page lacks the remote output")
	}
	out := remoteOutput(data, "remote-a", ok)
	if !strings.HasPrefix(out, "remote hello on 0,1\ncheckpoint: /") || !strings.HasSuffix(out, fmt.Sprintf("/jobs/%d/checkpoint\n", ok)) {
		t.Errorf("output = %q; want the GPUs and the job's checkpoint folder", out)
	}
	f := alice.waitState(bad, 30*time.Second, "failed")
	if f.ExitCode == nil || *f.ExitCode != 3 || remoteOutput(data, "remote-a", bad) != "about to fail\n" {
		t.Errorf("failing job = %+v, output %q; want exit code 3 and its output", f, remoteOutput(data, "remote-a", bad))
	}
}

// faultKilledAgentsJobFinishesOnAnother kills the agent running a job with
// SIGKILL: after the heartbeat timeout the job is requeued and finishes on
// the other agent. The server's grace is the agents' (1 s, as in the fault
// tests), so the requeue comes twice the timeout and that grace after the
// last heartbeat, not the default grace's 10 s more.
func faultKilledAgentsJobFinishesOnAnother(t *testing.T) {
	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--heartbeat-timeout", faultTimeout, "--grace", faultGrace)
	agents := map[string]*server{
		"agent-a": startAgent(t, srv.URL, "agent-a"),
		"agent-b": startAgent(t, srv.URL, "agent-b"),
	}
	waitGPUs(t, srv.URL, 4)
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "survivor", "gpus": 2, "command": []string{"sh", "-c",
		`echo "start on $CUDA_VISIBLE_DEVICES"; sleep 2; echo "done"`}})
	j := alice.waitState(id, 30*time.Second, "running")
	first, _, _ := strings.Cut(j.Placement[0], ":")
	// Running in the store comes before the agent has started it: wait for
	// its first output, so the agent dies while the job really runs.
	eventually(t, 10*time.Second, "the job's first output", func() bool { return remoteOutput(data, first, id) != "" })
	agents[first].kill()
	killedAt := time.Now()

	j = alice.waitState(id, 30*time.Second, "succeeded")
	second, _, _ := strings.Cut(j.Placement[0], ":")
	if second == first {
		t.Errorf("job finished on %s, the killed agent", second)
	}
	if d := time.Since(killedAt); d < 2*time.Second {
		t.Errorf("requeued and finished %v after the kill, before the heartbeat timeout", d)
	}
	// The agent says the run starts over (the first wrote no checkpoint,
	// and it was on another machine), then the job's own lines.
	if out, want := remoteOutput(data, second, id), "gpuportal: run 2 starts from scratch: its checkpoint folder on "+second+" is empty\nstart on 0,1\ndone\n"; out != want {
		t.Errorf("output of the second run = %q, want %q", out, want)
	}
	// Lost with its machine: after the heartbeat timeout, or at once when
	// the kill came before the machine had confirmed the start (its
	// output can come first).
	if out := srv.output(); !strings.Contains(out, "requeued: node "+first+" lost") && !strings.Contains(out, "requeued: "+first+" disconnected while starting it") {
		t.Errorf("server did not requeue the job as lost with %s", first)
	}
}

// faultServerCrashWhileAgentRuns kills the server while a remote job runs
// and starts it again on the same address and data: the agent reconnects,
// and the job, never restarted, finishes with all its output.
func faultServerCrashWhileAgentRuns(t *testing.T) {
	data := t.TempDir()
	// A generous timeout: the agent's reconnection backoff must fit in it.
	args := []string{"--data", data, "--heartbeat-timeout", "20s"}
	srv := startAgentServer(t, args...)
	ag := startAgent(t, srv.URL, "steady")
	waitGPUs(t, srv.URL, 2)
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "long", "gpus": 1, "command": []string{"sh", "-c", `echo before; sleep 2; echo after`}})
	before := alice.waitState(id, 30*time.Second, "running")
	eventually(t, 10*time.Second, "the first line of output", func() bool { return remoteOutput(data, "steady", id) == "before\n" })

	srv.kill()
	srv2 := startAgentServerAt(t, srv, args...)
	alice2 := newAPI(t, srv2.URL, "alice", "dev")
	j := alice2.waitState(id, 40*time.Second, "succeeded")
	if j.StartedAt == nil || !j.StartedAt.Equal(*before.StartedAt) || j.Preemptions != 0 || !strings.Contains(strings.Join(j.Placement, ","), "steady:") {
		t.Errorf("job after the restart = %+v; want its first run, kept", j)
	}
	if out := remoteOutput(data, "steady", id); out != "before\nafter\n" {
		t.Errorf("output across the restart = %q, want each line once", out)
	}
	if n := strings.Count(ag.output(), "connected to the server"); n < 2 {
		t.Errorf("agent connected %d times, want a reconnection", n)
	}
}

// faultServerCrashWhileRunStops cancels a running job that saves its work
// on SIGTERM (8 s, then exit 0), and kills the server while it saves: the
// restarted server, which did not ask for that exit, ends the job
// cancelled, as asked (not succeeded, as an exit 0 reads), and never
// starts it again. Judged from the job's own output too.
func faultServerCrashWhileRunStops(t *testing.T) {
	data := t.TempDir()
	args := []string{"--data", data, "--heartbeat-timeout", "20s", "--max-retries", "3"}
	srv := startAgentServer(t, args...)
	startAgent(t, srv.URL, "saver", "--grace", "30s")
	waitGPUs(t, srv.URL, 2)
	alice := newAPI(t, srv.URL, "alice", "dev")
	script := `trap 'echo "saving $$"; sleep 8; echo "saved $$"; exit 0' TERM; echo "started $$"; while :; do sleep 0.2; done`
	id := submit(t, alice, map[string]any{"name": "saver", "gpus": 1, "retries": 2, "command": []string{"sh", "-c", script}})
	alice.waitState(id, 30*time.Second, "running")
	eventually(t, 10*time.Second, "the job's first line", func() bool { return strings.Contains(remoteOutput(data, "saver", id), "started") })
	if st := alice.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", id), nil, nil); st >= 300 {
		t.Fatalf("cancel: status %d", st)
	}
	eventually(t, 10*time.Second, "the job to begin saving", func() bool { return strings.Contains(remoteOutput(data, "saver", id), "saving") })
	srv.kill()
	srv2 := startAgentServerAt(t, srv, args...)
	alice2 := newAPI(t, srv2.URL, "alice", "dev")
	// While it saves, the new server says why it stops, as the old one did.
	var saving jobView
	eventually(t, 20*time.Second, "the job to show it was asked to stop", func() bool {
		saving = alice2.job(id)
		return saving.State != "running" || strings.Contains(saving.Reason, "asked to stop")
	})
	if saving.State != "running" || !strings.Contains(saving.Reason, "cancelled by alice") {
		t.Errorf("while it saves after the restart: %s (%q), want running, asked to stop: cancelled by alice", saving.State, saving.Reason)
	}
	j := alice2.waitState(id, 40*time.Second, "cancelled", "succeeded", "failed")
	if j.State != "cancelled" || !strings.Contains(j.Reason, "cancelled by alice") {
		t.Errorf("job after the restart: %s (%q), want cancelled by alice", j.State, j.Reason)
	}
	time.Sleep(2 * time.Second) // a pass or two: nothing starts it again
	out := remoteOutput(data, "saver", id)
	if strings.Count(out, "started") != 1 || strings.Count(out, "saved") != 1 {
		t.Errorf("the job's output = %q, want one run that saved once", out)
	}
	var runs, ends int
	hist := jobHistory(t, alice2, id)
	for _, h := range hist {
		switch h.State {
		case "running":
			runs++
		case "succeeded", "failed", "cancelled":
			ends++
		}
	}
	if runs != 1 || ends != 1 || hist[len(hist)-1].State != "cancelled" {
		t.Errorf("the job's history: %d runs, %d ends, want one of each, cancelled last: %+v", runs, ends, hist)
	}
}
