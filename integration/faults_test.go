package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The fault suite (issue 15): real servers and agents, real command jobs
// that trace themselves (trace_test.go), and the faults a cluster has.
// Each test checks, from the trace files and the job histories, that no
// job ran twice at once, that no GPU ran two jobs at once, and that every
// job submitted ended exactly once, succeeded.

// TestFaults runs the fault tests side by side, -parallel of them at a
// time (4, see TestMain), as subtests of one test that does not call
// t.Parallel: go test runs it with the other serial tests, so nothing
// but fault tests runs meanwhile. They spend their time waiting on the
// clock (heartbeat timeouts, outages, jobs that tick) with a server and
// agents that are idle between ticks, so together they take about a
// third of the sum (on a loaded 2-core machine, back to back: 303 s one
// at a time, 103 s side by side; 102-119 s in three runs at a load of
// 30, all passing); kept from the Chromium, Podman and torch tests of
// the parallel phase, their 2 s heartbeat timeout stays far above what
// a busy machine delays a heartbeat by. go test, not this list, orders
// their starts. One alone:
//
//	go test -run 'TestFaults/DatabaseStopped$' -v ./integration
func TestFaults(t *testing.T) {
	// go test prints a parent's own time, 0 s here: its subtests' is
	// said once they have all ended.
	start := time.Now()
	t.Cleanup(func() { t.Logf("the fault tests took %v side by side", time.Since(start).Round(100*time.Millisecond)) })
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"DatabaseStopped", faultDatabaseStopped},
		{"DatabaseOutageLongerThanTheHold", faultDatabaseOutageLongerThanTheHold},
		{"CheckpointResume", faultCheckpointResume},
		{"CheckpointCopiedAcrossServerRestart", faultCheckpointCopiedAcrossServerRestart},
		{"CheckpointCopyDiskFull", faultCheckpointCopyDiskFull},
		{"CheckpointCopiedDuringDatabaseOutage", faultCheckpointCopiedDuringDatabaseOutage},
		{"GangMovesWithItsCheckpoints", faultGangMovesWithItsCheckpoints},
		{"AgentReconnectsDuringDatabaseOutage", faultAgentReconnectsDuringDatabaseOutage},
		{"FrozenAgent", faultFrozenAgent},
		{"StartSentToAFrozenAgent", faultStartSentToAFrozenAgent},
		{"ServerRestartedDuringDatabaseOutage", faultServerRestartedDuringDatabaseOutage},
		{"Partition", faultPartition},
		{"JobEndsDuringPartition", faultJobEndsDuringPartition},
		{"JobEndsWhileItsMachineIsCutOff", faultJobEndsWhileItsMachineIsCutOff},
		{"ServerBackMidFence", faultServerBackMidFence},
		{"ServerDownLongerThanTheTimeout", faultServerDownLongerThanTheTimeout},
		{"ForgedExit", faultForgedExit},
		{"DiskFull", faultDiskFull},
		{"KilledAgentsJobFinishesOnAnother", faultKilledAgentsJobFinishesOnAnother},
		{"KilledAgentRestarts", faultKilledAgentRestarts},
		{"TwoAgentsOneName", faultTwoAgentsOneName},
		{"ServerCrashWhileAgentRuns", faultServerCrashWhileAgentRuns},
		{"ServerCrashWhileRunStops", faultServerCrashWhileRunStops},
		{"JoinTokens", faultJoinTokens},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // with the other fault tests only: see above
			tc.run(t)
		})
	}
}

// Timing used by the fault tests: the heartbeat timeout and the agents'
// grace period (startAgent passes --grace 1s).
const (
	faultTimeout = "2s"
	faultGrace   = "1s"
)

// faultServer starts a server for remote agents with the fault tests'
// timing; extra flags follow.
func faultServer(t *testing.T, data string, extra ...string) *server {
	t.Helper()
	args := append([]string{"--data", data, "--heartbeat-timeout", faultTimeout, "--grace", faultGrace,
		"--max-retries", "0", "--policy", "fifo"}, extra...)
	return startAgentServer(t, args...)
}

// oneGPUAgent starts an agent of one simulated 1-GPU machine.
func oneGPUAgent(t *testing.T, url, name string, extra ...string) *server {
	t.Helper()
	return startAgent(t, url, name, append([]string{"--gpus", "sim:1x1x80"}, extra...)...)
}

// history is a job's history as the API gives it.
type historyEntry struct {
	At     time.Time `json:"at"`
	State  string    `json:"state"`
	Detail string    `json:"detail"`
}

func jobHistory(t *testing.T, a *api, id int64) []historyEntry {
	t.Helper()
	var h []historyEntry
	if st := a.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/history", id), nil, &h); st != http.StatusOK {
		t.Fatalf("history of job %d: status %d", id, st)
	}
	return h
}

// endsOnce checks that each job succeeded and that its history ends once.
func endsOnce(t *testing.T, a *api, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		j := a.job(id)
		if j.State != "succeeded" {
			t.Errorf("job %d = %s (%s), want succeeded", id, j.State, j.Reason)
		}
		ends := 0
		var states []string
		for _, h := range jobHistory(t, a, id) {
			states = append(states, h.State+": "+h.Detail)
			// A note on one of its runs (what it resumed from, how a run
			// ended as lost had really ended) carries the job's state
			// when written, and is not an end.
			note := strings.HasPrefix(h.Detail, "run ")
			if !note && (h.State == "succeeded" || h.State == "failed" || h.State == "cancelled") {
				ends++
			}
		}
		if ends != 1 {
			t.Errorf("job %d ended %d times: %q", id, ends, states)
		}
		if testing.Verbose() {
			t.Logf("job %d history: %q", id, states)
		}
	}
}

// traceStarted waits until job id's trace shows a line of a run on node.
func traceStarted(t *testing.T, dir string, id int64, node string) *runSpan {
	t.Helper()
	var got *runSpan
	eventually(t, 30*time.Second, fmt.Sprintf("job %d to trace on %s", id, node), func() bool {
		for _, s := range readTraces(t, dir) {
			if s.job == id && (node == "" || s.node == node) {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

// traceNextRun waits until job id's trace shows a run other than prev.
func traceNextRun(t *testing.T, dir string, id int64, prev *runSpan) *runSpan {
	t.Helper()
	var got *runSpan
	eventually(t, 30*time.Second, fmt.Sprintf("job %d to start again", id), func() bool {
		for _, s := range readTraces(t, dir) {
			if s.job == id && s.run != prev.run {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

// traceLines waits until run's part on its machine has traced n lines:
// it has run n ticks.
func traceLines(t *testing.T, dir string, run *runSpan, n int) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("%v to trace %d lines", run, n), func() bool {
		for _, s := range readTraces(t, dir) {
			if s.job == run.job && s.run == run.run && s.node == run.node {
				return s.lines >= n
			}
		}
		return false
	})
}

// placedOn is the machine a running job's first GPU is on, as the API says.
func placedOn(t *testing.T, a *api, id int64) string {
	t.Helper()
	j := a.waitState(id, 30*time.Second, "running")
	node, _, _ := strings.Cut(j.Placement[0], ":")
	return node
}

// signal sends sig to a child process of the test.
func (s *server) signal(sig syscall.Signal) {
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signal %v: %v", sig, err)
	}
}

// faultFrozenAgent freezes the agent that runs a job (SIGSTOP) for
// longer than the heartbeat timeout. Its watchdog stops the job before
// the server starts it on the other agent; when the agent thaws, the
// stale run changes nothing.
func faultFrozenAgent(t *testing.T) {
	data, traces := t.TempDir(), t.TempDir()
	srv := faultServer(t, data)
	agents := map[string]*server{"a1": oneGPUAgent(t, srv.URL, "a1"), "a2": oneGPUAgent(t, srv.URL, "a2")}
	waitGPUs(t, srv.URL, 2)
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "frozen", "gpus": 1, "command": tracedJob(traces, 60)})
	first := traceStarted(t, traces, id, "")
	frozen := agents[placedOn(t, alice, id)]
	frozen.signal(syscall.SIGSTOP)
	second := traceNextRun(t, traces, id, first)
	traceLines(t, traces, second, 8) // both would run now, were the first not fenced
	frozen.signal(syscall.SIGCONT)
	alice.waitState(id, 60*time.Second, "succeeded")
	spans := checkTraces(t, traces)
	endsOnce(t, alice, id)
	if second.run == first.run {
		t.Errorf("the job's second start is run %d, like the first", second.run)
	}
	if last := spans[len(spans)-1]; last.lines != 60 {
		t.Errorf("the last run traced %d lines, want all 60", last.lines)
	}
}

// faultStartSentToAFrozenAgent freezes (SIGSTOP) the agent whose GPU is
// free, then submits a job: the server starts it there, the start waiting
// unread in the frozen agent's connection, takes the machine for lost
// after the heartbeat timeout and starts the job on the other agent once
// its GPU frees. Thawed, the first agent must not start the run the
// message it finally reads asks for: it was given away. Before, the
// agent took that message as word from a live server, renewed its lease
// by it and started the run beside the other (the fault soak, seed 21).
func faultStartSentToAFrozenAgent(t *testing.T) {
	data, traces := t.TempDir(), t.TempDir()
	srv := faultServer(t, data)
	agents := map[string]*server{"a1": oneGPUAgent(t, srv.URL, "a1"), "a2": oneGPUAgent(t, srv.URL, "a2")}
	waitGPUs(t, srv.URL, 2)
	alice := newAPI(t, srv.URL, "alice", "dev")
	blocker := submit(t, alice, map[string]any{"name": "blocker", "gpus": 1, "command": tracedJob(traces, 2000)})
	busy := placedOn(t, alice, blocker)
	free := "a1"
	if busy == "a1" {
		free = "a2"
	}
	agents[free].signal(syscall.SIGSTOP)
	id := submit(t, alice, map[string]any{"name": "sent-while-frozen", "gpus": 1, "command": tracedJob(traces, 40)})
	if node := placedOn(t, alice, id); node != free {
		t.Fatalf("job %d went to %s, want the frozen %s", id, node, free)
	}
	// The server takes the frozen machine for lost and requeues the job;
	// the blocker's end frees the other GPU for it.
	eventually(t, 30*time.Second, fmt.Sprintf("job %d requeued", id), func() bool { return alice.job(id).State != "running" })
	if st := alice.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", blocker), nil, nil); st != http.StatusOK {
		t.Fatalf("cancel job %d: status %d", blocker, st)
	}
	second := traceStarted(t, traces, id, busy)
	agents[free].signal(syscall.SIGCONT)
	traceLines(t, traces, second, 20) // the thawed agent has had time to start the stale run, if it would
	alice.waitState(id, 60*time.Second, "succeeded")
	checkTraces(t, traces)
	endsOnce(t, alice, id)
	for _, s := range readTraces(t, traces) {
		if s.job == id && s.node == free {
			t.Errorf("the thawed agent ran the job it had been sent while frozen: %s", s)
		}
	}
}

// cutOffAgent starts a fault server and an agent of one GPU, "cut", that
// reaches it through a forwarder the test can freeze, and returns them
// with alice's API.
func cutOffAgent(t *testing.T) (*server, *forwarder, *api) {
	t.Helper()
	srv := faultServer(t, t.TempDir())
	fw := newForwarder(t, strings.TrimPrefix(srv.URL, "http://"))
	oneGPUAgent(t, "http://"+fw.addr(), "cut")
	waitGPUs(t, srv.URL, 1)
	return srv, fw, newAPI(t, srv.URL, "alice", "dev")
}

// faultPartition cuts the network between an agent and the server
// with a TCP forwarder that stops passing bytes both ways, then heals it.
func faultPartition(t *testing.T) {
	traces := t.TempDir()
	srv, fw, alice := cutOffAgent(t)
	id := submit(t, alice, map[string]any{"name": "partitioned", "gpus": 1, "command": tracedJob(traces, 40)})
	first := traceStarted(t, traces, id, "")
	oneGPUAgent(t, srv.URL, "whole")
	fw.freeze()
	second := traceNextRun(t, traces, id, first)
	traceLines(t, traces, second, 8) // both would run now, were the cut one not fenced
	fw.thaw()
	alice.waitState(id, 60*time.Second, "succeeded")
	checkTraces(t, traces)
	endsOnce(t, alice, id)
}

// cutTicks is the length, in ticks, of the jobs cutWithASecondLeft runs.
const cutTicks = 12

// cutWithASecondLeft starts a fault server, the agent "cut" behind a
// forwarder (cutOffAgent) and a traced job of cutTicks ticks there named
// name, and freezes the forwarder when the job has a second left to run:
// less than the heartbeat timeout, after which the agent would fence it.
// It returns the server, the forwarder, alice's API, the traces' folder,
// the job and its first run.
func cutWithASecondLeft(t *testing.T, name string) (*server, *forwarder, *api, string, int64, *runSpan) {
	t.Helper()
	traces := t.TempDir()
	srv, fw, alice := cutOffAgent(t)
	id := submit(t, alice, map[string]any{"name": name, "gpus": 1, "command": tracedJob(traces, cutTicks)})
	first := traceStarted(t, traces, id, "")
	traceLines(t, traces, first, cutTicks-4)
	fw.freeze()
	return srv, fw, alice, traces, id, first
}

// faultJobEndsDuringPartition cuts a machine off while its job has a
// second left to run: the job succeeds there, but its exit cannot reach
// the server, which takes the machine for lost and runs the job again on
// another. When the cut heals, the machine reports the first run's exit:
// the job's history says that run had succeeded, and when; the job ends
// once, never twice at once.
func faultJobEndsDuringPartition(t *testing.T) {
	const ticks = cutTicks
	srv, fw, alice, traces, id, first := cutWithASecondLeft(t, "ends-cut-off")
	oneGPUAgent(t, srv.URL, "whole")
	second := traceNextRun(t, traces, id, first)
	alice.waitState(id, 60*time.Second, "succeeded")
	fw.thaw()
	want := fmt.Sprintf("run %d had ended on cut at ", first.run)
	var note string
	eventually(t, 30*time.Second, "the history to say how run 1 ended on the machine cut off", func() bool {
		for _, h := range jobHistory(t, alice, id) {
			if strings.HasPrefix(h.Detail, want) {
				note = h.Detail
			}
		}
		return note != ""
	})
	t.Logf("history: %s", note)
	spans := checkTraces(t, traces)
	endsOnce(t, alice, id)
	firstRun := &runSpan{}
	for _, sp := range spans {
		if sp.run == first.run {
			firstRun = sp
		}
	}
	if firstRun.lines != ticks || second.node != "whole" {
		t.Errorf("run %d traced %d lines on %s, then run %d on %s; want all %d on cut, then another run on whole",
			first.run, firstRun.lines, firstRun.node, second.run, second.node, ticks)
	}
	// The machine's clock is this one's: the exit it reports comes within
	// a second of the run's last trace.
	near := false
	for _, d := range []time.Duration{-time.Second, 0, time.Second} {
		near = near || strings.Contains(note, " at "+firstRun.last.Add(d).UTC().Format("15:04:05")+" UTC")
	}
	if !strings.Contains(note, "with success (exit code 0) while the machine was cut off") || !near {
		t.Errorf("history %q; want run %d's success while cut off, at about %s, its last trace", note, first.run, firstRun.last.UTC().Format("15:04:05"))
	}
}

// faultKilledAgentRestarts kills an agent with SIGKILL while its job
// runs, and starts it again on the same work folder at once: the job must
// not run twice, and must end once.
func faultKilledAgentRestarts(t *testing.T) {
	data, traces, work := t.TempDir(), t.TempDir(), t.TempDir()
	srv := faultServer(t, data)
	a := oneGPUAgent(t, srv.URL, "phoenix", "--work-dir", work)
	waitGPUs(t, srv.URL, 1)
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "killed", "gpus": 1, "command": tracedJob(traces, 20)})
	traceStarted(t, traces, id, "")
	a.kill()
	oneGPUAgent(t, srv.URL, "phoenix", "--work-dir", work)
	alice.waitState(id, 60*time.Second, "succeeded")
	checkTraces(t, traces)
	endsOnce(t, alice, id)
}

// faultJobEndsWhileItsMachineIsCutOff cuts the only machine off while
// its job has a second left to run, and heals the cut once the server has
// taken the machine for lost and put the job back in the queue, with no
// machine to run it elsewhere. The job succeeds on the machine meanwhile;
// when the machine comes back the server takes the job back as that run
// and records the exit the machine kept: one run in the traces, one end,
// no second start, and the job's executed time is the run's whole span,
// up to the end its machine reports, not up to when the server took the
// machine for lost (the heartbeat timeout after its last word).
func faultJobEndsWhileItsMachineIsCutOff(t *testing.T) {
	const ticks = cutTicks
	_, fw, alice, traces, id, first := cutWithASecondLeft(t, "ends-alone")
	alice.waitState(id, 30*time.Second, "queued")
	traceLines(t, traces, first, ticks)
	time.Sleep(time.Second) // the run's last tick, and its exit
	fw.thaw()
	j := alice.waitState(id, 60*time.Second, "succeeded")
	spans := checkTraces(t, traces)
	endsOnce(t, alice, id)
	if len(spans) != 1 || spans[0].run != first.run || spans[0].lines != ticks {
		t.Fatalf("traces %v; want run %d alone, all %d lines", spans, first.run, ticks)
	}
	// At least the run's first line to its last; at most from the
	// server's record of the start (before the start's way to the agent
	// and the job's to its first line, which a loaded machine makes
	// seconds long) to the last line, its last tick and the exit's way
	// back: well short of the 6 s the machine was taken for lost.
	span := spans[0].last.Sub(spans[0].first).Seconds()
	var started time.Time
	for _, h := range jobHistory(t, alice, id) {
		if h.State == "running" {
			started = h.At
			break
		}
	}
	upTo := spans[0].last.Sub(started).Seconds()
	t.Logf("executed %.2f s; the run's traces span %.2f s, %.2f s from the recorded start", j.ExecutedS, span, upTo)
	if j.ExecutedS < span || j.ExecutedS > upTo+tick.Seconds()+0.5 {
		t.Errorf("executed %.2f s; the run's traces span %.2f s (%.2f s from the recorded start), and it never stopped", j.ExecutedS, span, upTo)
	}
}

// faultServerDownLongerThanTheTimeout kills the server under load
// and keeps it down past the heartbeat timeout: the agents fence their
// runs and keep their exits; the new server requeues the jobs, and the
// old runs' exits, delivered late, change nothing.
func faultServerDownLongerThanTheTimeout(t *testing.T) {
	data, traces := t.TempDir(), t.TempDir()
	srv := faultServer(t, data)
	var agents []*server
	for _, n := range []string{"s1", "s2"} {
		agents = append(agents, startAgent(t, srv.URL, n)) // 2 GPUs each
	}
	waitGPUs(t, srv.URL, 4)
	alice := newAPI(t, srv.URL, "alice", "dev")
	var ids []int64
	for i := range 6 {
		ids = append(ids, submit(t, alice, map[string]any{"name": fmt.Sprint("load", i), "gpus": 1, "command": tracedJob(traces, 16)}))
	}
	for _, id := range ids[:4] {
		traceStarted(t, traces, id, "")
	}
	srv.kill()
	// The agents (or their watchdogs) fence the four runs, which end and
	// whose exits the agents keep: each says so as the run ends.
	eventually(t, 30*time.Second, "the agents to fence their four runs and keep their exits", func() bool {
		n := 0
		for _, a := range agents {
			n += strings.Count(a.output(), "which heard no server for longer than the heartbeat timeout")
		}
		return n >= 4
	})
	srv2 := faultServer(t, data, "--addr", strings.TrimPrefix(srv.URL, "http://"))
	alice2 := newAPI(t, srv2.URL, "alice", "dev")
	for _, id := range ids {
		alice2.waitState(id, 90*time.Second, "succeeded")
	}
	checkTraces(t, traces)
	endsOnce(t, alice2, ids...)
}

// faultServerBackMidFence (issue 32): the server is killed and is
// back while its agent fences the runs it leased: SIGTERM sent, the runs
// take 3 s to save and exit, within the agent's 5 s grace, and end after
// the agent has reconnected (the exit of a fenced run was taken for the
// job's own failure when it came after the reconnection). The server is
// killed again as the agent reconnects, and is back. Both runs are
// requeued, not failed, and the jobs succeed on their next run.
func faultServerBackMidFence(t *testing.T) {
	data, traces := t.TempDir(), t.TempDir()
	srv := faultServer(t, data)
	a := startAgent(t, srv.URL, "mid", "--grace", "5s") // 2 GPUs
	waitGPUs(t, srv.URL, 2)
	alice := newAPI(t, srv.URL, "alice", "dev")
	var ids []int64
	for i := range 2 {
		cmd := tracedJob(traces, 24)
		cmd[2] = fmt.Sprintf(`trap 'touch %[1]s/term-$GPUPORTAL_JOB_ID-$GPUPORTAL_RUN; sleep 3; touch %[1]s/died-$GPUPORTAL_JOB_ID-$GPUPORTAL_RUN; exit 143' TERM; `,
			traces) + cmd[2]
		ids = append(ids, submit(t, alice, map[string]any{"name": fmt.Sprint("mid-", i), "gpus": 1, "command": cmd}))
	}
	for _, id := range ids {
		traceStarted(t, traces, id, "mid")
	}
	const connected = `msg="connected to the server"`
	before := strings.Count(a.output(), connected)
	srv.kill()
	marker := func(kind string, id int64) string { return filepath.Join(traces, fmt.Sprintf("%s-%d-1", kind, id)) }
	eventually(t, 15*time.Second, "the agent to fence both runs", func() bool {
		for _, id := range ids {
			if _, err := os.Stat(marker("term", id)); err != nil {
				return false
			}
		}
		return true
	})
	srv = faultServer(t, data, "--addr", strings.TrimPrefix(srv.URL, "http://"))
	eventually(t, 10*time.Second, "the agent to reconnect", func() bool { return strings.Count(a.output(), connected) > before })
	for _, id := range ids {
		if _, err := os.Stat(marker("died", id)); err == nil {
			t.Fatalf("job %d's fenced run ended before the agent reconnected: nothing this test checks", id)
		}
	}
	// Killed again mid-reconnect, as the new server takes the agent and
	// its runs back; the third server gets the fenced runs' exits.
	srv.kill()
	srv = faultServer(t, data, "--addr", strings.TrimPrefix(srv.URL, "http://"))
	alice = newAPI(t, srv.URL, "alice", "dev")
	for _, id := range ids {
		alice.waitState(id, time.Minute, "succeeded")
	}
	runs := make(map[int64]int)
	for _, sp := range checkTraces(t, traces) {
		runs[sp.job]++
	}
	for _, id := range ids {
		if runs[id] != 2 {
			t.Errorf("job %d traced %d runs; want 2, the fenced one and the next", id, runs[id])
		}
	}
	endsOnce(t, alice, ids...)
}

// TestFaultServerRestartWithinTheLease (issue 32): a server killed and
// back within the heartbeat timeout T costs no run. Agents are pinged
// every T/20 and retry every T/40 while their runs are leased, so a
// restart that leaves them unheard for less than about 0.9 T is adopted
// whole: every job runs once, from start to end, on its first run, after
// an outage of 0.5 T and one of 0.9 T.
//
// The outage is timed from the agents' own record of when they last
// heard the server (the "heard" of their retries), not from the kill, and
// ended by the test, not by the new server's start: the agents reach the
// server through a forwarder that refuses them until the earliest heard
// plus the outage, while the new server starts behind it. So neither the
// time a loaded machine takes to start a server nor the phase of the
// pings moves the outage; what is left to the machine is the agents'
// reconnection within the 0.1 T (2 s) the lease has left.
func TestFaultServerRestartWithinTheLease(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	const timeout = 20 * time.Second
	data, traces := t.TempDir(), t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := []string{"--data", data, "--heartbeat-timeout", timeout.String(), "--grace", faultGrace, "--max-retries", "0",
		"--policy", "fifo", "--addr", addr}
	srv := startAgentServer(t, args...)
	fw := newForwarder(t, addr)
	var agents []*server
	for _, n := range []string{"r1", "r2"} {
		agents = append(agents, startAgent(t, "http://"+fw.addr(), n)) // 2 GPUs each
	}
	defer func() {
		if t.Failed() {
			for _, a := range agents {
				t.Logf("agent:\n%s", a.output())
			}
			checkTraces(t, traces) // how far each run got, from the runs' own record
		}
	}()
	waitGPUs(t, srv.URL, 4)
	alice := newAPI(t, srv.URL, "alice", "dev")
	var ids []int64
	ticks := int((timeout*3/2 + 30*time.Second) / tick) // through both outages
	for i := range 4 {
		ids = append(ids, submit(t, alice, map[string]any{"name": fmt.Sprint("leased", i), "gpus": 1, "command": tracedJob(traces, ticks)}))
	}
	for _, id := range ids {
		traceStarted(t, traces, id, "")
	}
	for _, outage := range []float64{0.5, 0.9} {
		fw.refuse()
		seen := make([]int, len(agents))
		for i, a := range agents {
			seen[i] = len(a.output())
		}
		srv.kill()
		srv = startAgentServer(t, args...)
		heard := lastHeard(t, agents, seen)
		// About time: the outage is the fault this test makes, ended at a
		// moment set by the agents' record, not a wait for an event.
		time.Sleep(time.Until(heard.Add(time.Duration(outage * float64(timeout)))))
		fw.admit()
		down := time.Since(heard)
		t.Logf("agents unheard %v (%.2f T) when the server could be reached again", down.Round(time.Millisecond), down.Seconds()/timeout.Seconds())
		if down >= timeout {
			t.Fatalf("the server came back %v after the agents last heard it, past T: nothing this test checks", down)
		}
		// Both machines back before the next outage.
		waitGPUs(t, srv.URL, 4)
		for i, a := range agents {
			// While their runs were leased, the agents retried every T/40
			// (with up to 20% jitter), not after a growing backoff.
			for _, wait := range retryWaits(t, a.output()[seen[i]:]) {
				if wait > timeout/40*12/10 {
					t.Errorf("agent %d retried after %v, unheard %.1f T: want T/40 while its runs are leased", i+1, wait, outage)
				}
			}
		}
		a := newAPI(t, srv.URL, "alice", "dev")
		for _, id := range ids {
			if j := a.job(id); j.State != "running" {
				t.Errorf("after %.1f T unheard, job %d is %s (%s), want running still", outage, id, j.State, j.Reason)
			}
		}
	}
	alice = newAPI(t, srv.URL, "alice", "dev")
	for _, id := range ids {
		alice.waitTracedEnd(traces, id, 30*time.Second, 10*time.Minute, "succeeded")
	}
	for _, sp := range checkTraces(t, traces) {
		if sp.run != 1 || sp.lines != ticks {
			t.Errorf("%v: want each job's first run, all %d ticks of it", sp, ticks)
		}
	}
	endsOnce(t, alice, ids...)
}

// retryWaits are the waits before the next attempt that an agent's
// output says, in its retries ("in").
func retryWaits(t *testing.T, out string) []time.Duration {
	t.Helper()
	var waits []time.Duration
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, `msg="not connected to the server; retrying"`) {
			continue
		}
		i := strings.LastIndex(line, " in=") // after the error's text
		if i < 0 {
			t.Fatalf("a retry without its wait: %s", line)
		}
		v, _, _ := strings.Cut(line[i+len(" in="):], " ")
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("retry's wait %q: %v", v, err)
		}
		waits = append(waits, d)
	}
	return waits
}

// lastHeard is the earliest of agents' records of when they last heard a
// server, from the first retry each logs after seen (the length of its
// output before the server went): whose lease runs out first.
func lastHeard(t *testing.T, agents []*server, seen []int) time.Time {
	t.Helper()
	var earliest time.Time
	for i, a := range agents {
		var heard time.Time
		eventually(t, 30*time.Second, "the agent to retry and say when it last heard the server", func() bool {
			out := a.output()[seen[i]:]
			for _, line := range strings.Split(out, "\n") {
				if !strings.Contains(line, `msg="not connected to the server; retrying"`) {
					continue
				}
				_, v, ok := strings.Cut(line, " heard=")
				if !ok {
					continue
				}
				v, _, _ = strings.Cut(v, " ")
				h, err := time.Parse(time.RFC3339, v)
				if err != nil {
					t.Fatalf("agent's heard %q: %v", v, err)
				}
				heard = h
				return true
			}
			return false
		})
		if earliest.IsZero() || heard.Before(earliest) {
			earliest = heard
		}
	}
	return earliest
}

// faultForgedExit: an agent with the shared token registers a machine
// of its own and reports a job running elsewhere as ended. Nothing
// changes.
func faultForgedExit(t *testing.T) {
	data, traces := t.TempDir(), t.TempDir()
	srv := faultServer(t, data)
	oneGPUAgent(t, srv.URL, "honest")
	waitGPUs(t, srv.URL, 1)
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "victim", "gpus": 1, "command": tracedJob(traces, 40)})
	run := traceStarted(t, traces, id, "").run

	ws := dialAgent(t, srv.URL, map[string]any{"version": 3, "agent": "mallory", "nodes": []any{map[string]any{
		"name": "mallory", "cpus": 1, "mem_mib": 1024, "gpus": []any{map[string]any{"index": 0, "uuid": "GPU-x", "model": "x", "mem_mib": 1024}},
		"running": []any{},
	}}})
	for _, node := range []string{"honest", "mallory"} {
		forged := map[string]any{"type": "exit", "id": 99, "exit": map[string]any{"node": node, "job_id": id, "run": run, "exit_code": 0, "at": time.Now()}}
		if err := ws.WriteJSON(forged); err != nil {
			t.Fatal(err)
		}
	}
	afterPasses(t, srv.URL, 3)
	if j := alice.job(id); j.State != "running" {
		t.Fatalf("after forged exits, job %d = %s, want still running", id, j.State)
	}
	alice.waitTracedEnd(traces, id, 30*time.Second, 5*time.Minute, "succeeded")
	spans := checkTraces(t, traces)
	endsOnce(t, alice, id)
	if len(spans) != 1 || spans[0].lines != 40 {
		t.Errorf("spans %v, want one run of 40 lines", spans)
	}
}

// forwarder passes TCP connections to a target and can freeze: stop
// passing bytes both ways, without closing anything, as a partition does.
// A side that closes its connection is passed on as a close (its FIN, or
// a reset), so that a server that dies behind it is seen to die.
type forwarder struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu     sync.Mutex
	frozen bool
	// held: the target's replies are held, the requests pass (holdReplies).
	held bool
	// refused: new connections are closed as soon as they come, as by a
	// target that does not listen (refuse).
	refused bool
	thawed  *sync.Cond
	conns   []net.Conn
}

func newForwarder(t *testing.T, target string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{t: t, ln: ln, target: target}
	f.thawed = sync.NewCond(&f.mu)
	t.Cleanup(f.close)
	go f.accept()
	return f
}

func (f *forwarder) addr() string { return f.ln.Addr().String() }

func (f *forwarder) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		refused := f.refused
		f.mu.Unlock()
		if refused {
			c.Close()
			continue
		}
		d, err := net.Dial("tcp", f.target)
		if err != nil {
			c.Close()
			continue
		}
		f.mu.Lock()
		f.conns = append(f.conns, c, d)
		f.mu.Unlock()
		go f.pipe(c, d, false)
		go f.pipe(d, c, true)
	}
}

// pipe copies from src to dst, holding every chunk while frozen, and
// those of a reply (from the target) while replies are held; src's end
// is held as long and passed on as dst's: its close ends dst's writes, a
// reset or a write that fails closes both.
func (f *forwarder) pipe(src, dst net.Conn, reply bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		f.mu.Lock()
		for f.frozen || reply && f.held {
			f.thawed.Wait()
		}
		f.mu.Unlock()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				src.Close()
				dst.Close()
				return
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok && err == io.EOF {
				_ = tc.CloseWrite()
			} else {
				dst.Close()
			}
			return
		}
	}
}

func (f *forwarder) freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

// holdReplies lets requests through and holds the target's answers: a
// request is carried out, its answer lost until cut.
func (f *forwarder) holdReplies() {
	f.mu.Lock()
	f.held = true
	f.mu.Unlock()
}

// cut closes every connection, as a network that gave up does, and lets
// new ones through whole.
func (f *forwarder) cut() {
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.held = false
	f.thawed.Broadcast()
	f.mu.Unlock()
}

// refuse closes each new connection as it comes; admit passes them on
// again. Connections already made go on.
func (f *forwarder) refuse() {
	f.mu.Lock()
	f.refused = true
	f.mu.Unlock()
}

func (f *forwarder) admit() {
	f.mu.Lock()
	f.refused = false
	f.mu.Unlock()
}

func (f *forwarder) thaw() {
	f.mu.Lock()
	f.frozen = false
	f.thawed.Broadcast()
	f.mu.Unlock()
}

func (f *forwarder) close() {
	f.thaw()
	f.ln.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
}

// dialAgent opens an agent connection with the shared agent token, says
// hello and reads the welcome.
func dialAgent(t *testing.T, base string, hello map[string]any) *websocket.Conn {
	t.Helper()
	url := "ws" + strings.TrimPrefix(base, "http") + "/api/v1/agents/connect"
	ws, resp, err := websocket.DefaultDialer.Dial(url, http.Header{"Authorization": {"Bearer " + agentToken}})
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", url, err, resp)
	}
	t.Cleanup(func() { ws.Close() })
	if err := ws.WriteJSON(map[string]any{"type": "hello", "hello": hello}); err != nil {
		t.Fatal(err)
	}
	var welcome map[string]any
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := ws.ReadJSON(&welcome); err != nil || welcome["type"] != "welcome" {
		t.Fatalf("hello answered %v, %v", welcome, err)
	}
	go func() { // answer nothing, but keep reading so pings are handled
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	return ws
}

// faultDiskFull fills the server's data disk (a small tmpfs holding
// its SQLite database) while jobs end: their exits must wait, unanswered,
// until space returns, and then be recorded once; no job runs again.
func faultDiskFull(t *testing.T) {
	data := smallDisk(t, 64)
	traces := t.TempDir()
	srv := faultServer(t, data)
	startAgent(t, srv.URL, "d1") // 2 GPUs
	waitGPUs(t, srv.URL, 2)
	alice := newAPI(t, srv.URL, "alice", "dev")
	var ids []int64
	for i := range 2 {
		ids = append(ids, submit(t, alice, map[string]any{"name": fmt.Sprint("full", i), "gpus": 1, "command": tracedJob(traces, 12)}))
	}
	for _, id := range ids {
		traceStarted(t, traces, id, "")
	}
	filler := fill(t, data)
	// The jobs end while the disk is full.
	eventually(t, 30*time.Second, "both jobs to trace all their lines", func() bool {
		n := 0
		for _, s := range readTraces(t, traces) {
			if s.lines == 12 {
				n++
			}
		}
		return n == 2
	})
	eventually(t, 15*time.Second, "the server to hold the exits it cannot store", func() bool {
		return strings.Contains(metricsText(t, srv.URL), "gpuportal_unrecorded_exits 2")
	})
	afterPasses(t, srv.URL, 3) // several passes fail to store them
	// The store still says they run: their pages say they ended, and
	// that it is not yet recorded, and why (issue 32: no "running" 40 s
	// after the end with nothing said).
	for _, id := range ids {
		var j struct {
			State  string     `json:"state"`
			Reason string     `json:"reason"`
			AsOf   *time.Time `json:"as_of"`
		}
		if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j); st != http.StatusOK {
			t.Fatalf("GET job %d during the full disk: %d", id, st)
		}
		if !strings.Contains(j.Reason, "ended on d1") || !strings.Contains(j.Reason, "not yet recorded") ||
			!strings.Contains(j.Reason, "disk full") || j.AsOf == nil || time.Since(*j.AsOf) < time.Second {
			t.Errorf("job %d during the full disk: %s, %q, as of %v; want its end said, not yet recorded for the full disk, as of then", id, j.State, j.Reason, j.AsOf)
		} else {
			t.Logf("job %d during the full disk: %s: %s", id, j.State, j.Reason)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		alice.waitState(id, 30*time.Second, "succeeded")
	}
	spans := checkTraces(t, traces)
	endsOnce(t, alice, ids...)
	if len(spans) != 2 {
		t.Errorf("%d runs traced, want 2: a job ran again", len(spans))
	}
}

// smallDisk mounts a tmpfs of mib MiB for the test and returns its path.
// It needs root (CI runs as root); elsewhere the test is skipped, saying
// so, and under CI=true it fails.
func smallDisk(t *testing.T, mib int) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", mib), "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("cannot mount a tmpfs for a full disk (needs root): %v: %s", err, out)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes a file in dir until the disk is full and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path
			}
			t.Fatal(err)
		}
	}
}

// faultDatabaseStopped stops the server's PostgreSQL (a private
// instance) twice while jobs run, for 10 s and then 15 s (the 60 s
// by hand: GPUPORTAL_DB_DOWN=60s runs that one outage alone), each far
// past the heartbeat timeout (5 and 7.5 T) and the second past every 10 s
// bound on the way (the hub's wait for an ack, a dial, a machine's state
// read); a longer one shows nothing more and cost CI 15 s of waiting. The
// server, run by a supervisor that would restart it as systemd does, rides both out without exiting (issue 32):
// its machines stay connected and their runs go on, none is fenced or run
// twice; the exits of runs that end during the outage are recorded after
// it; no job starts while the database is out; submissions are refused
// with 503 naming the cause, and the one retried with its
// Idempotency-Key is accepted once the database is back, as one job.
func faultDatabaseStopped(t *testing.T) {
	pg := startPrivatePG(t)
	data, traces := t.TempDir(), t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	sup := supervise(t, "serve", "--dev", "--addr", addr, "--no-local-agent", "--agent-token", agentToken,
		"--data", data, "--db", pg.DSN(), "--heartbeat-timeout", faultTimeout, "--grace", faultGrace,
		"--max-retries", "0", "--policy", "fifo")
	base := "http://" + addr
	eventually(t, 30*time.Second, "the server to answer", func() bool { return role(base) == "leader" })
	for _, n := range []string{"p1", "p2"} {
		startAgent(t, base, n)
	}
	waitGPUs(t, base, 4)
	alice := newAPI(t, base, "alice", "dev")
	downs := []time.Duration{10 * time.Second, 15 * time.Second}
	if d, err := time.ParseDuration(os.Getenv("GPUPORTAL_DB_DOWN")); err == nil && d > 0 {
		downs = []time.Duration{d}
	}
	var ids []int64
	for i, down := range downs {
		ids = append(ids, dbOutage(t, pg, base, alice, traces, i, down)...)
	}
	spans := checkTraces(t, traces)
	endsOnce(t, alice, ids...)
	runs := make(map[int64]map[int64]bool)
	for _, s := range spans {
		if runs[s.job] == nil {
			runs[s.job] = make(map[int64]bool)
		}
		runs[s.job][s.run] = true
	}
	reruns := 0
	for _, id := range ids {
		if n := len(runs[id]); n != 1 {
			reruns += max(n-1, 0)
			t.Errorf("job %d traced %d runs, want 1", id, n)
		}
	}
	t.Logf("%d jobs through %d outages: %d reruns", len(ids), len(downs), reruns)
	if n := sup.starts(); n != 1 {
		t.Errorf("the server started %d times; want once: it must ride the outages out", n)
	}
}

// faultAgentReconnectsDuringDatabaseOutage (issue 32): the database
// stops, and while it is out the connection of the agent that runs two
// jobs is cut (a network fault) and heals. The fenced leader takes the
// agent back on the credential it checked before, so the agent keeps its
// runs: once the database is back, each job has run once, from start to
// end, and succeeded; the server never exited. The outage lasts well past
// the heartbeat timeout after the reconnect: an agent refused meanwhile
// would have fenced its runs.
func faultAgentReconnectsDuringDatabaseOutage(t *testing.T) {
	pg := startPrivatePG(t)
	data, traces := t.TempDir(), t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	sup := supervise(t, "serve", "--dev", "--addr", addr, "--no-local-agent", "--agent-token", agentToken,
		"--data", data, "--db", pg.DSN(), "--heartbeat-timeout", faultTimeout, "--grace", faultGrace,
		"--max-retries", "0", "--policy", "fifo")
	base := "http://" + addr
	eventually(t, 30*time.Second, "the server to answer", func() bool { return role(base) == "leader" })
	fw := newForwarder(t, addr)
	a := startAgent(t, "http://"+fw.addr(), "cut") // 2 GPUs
	waitGPUs(t, base, 2)
	alice := newAPI(t, base, "alice", "dev")
	const down = 12 * time.Second // 6 T
	var ids []int64
	for i := range 2 {
		ids = append(ids, submit(t, alice, map[string]any{"name": fmt.Sprint("kept-", i), "gpus": 1,
			"command": tracedJob(traces, int((down+8*time.Second)/tick))}))
	}
	for _, id := range ids {
		traceStarted(t, traces, id, "")
	}
	pg.stop()
	stopped := time.Now()
	eventually(t, 10*time.Second, "the leader to be fenced", func() bool { return metric(t, base, "gpuportal_leader_fenced") == "1" })
	const connected = `msg="connected to the server"`
	before := strings.Count(a.output(), connected)
	fw.cut()
	eventually(t, 10*time.Second, "the agent to reconnect while the database is out", func() bool {
		return strings.Count(a.output(), connected) > before
	})
	t.Logf("the agent reconnected %v into the outage", time.Since(stopped).Round(time.Millisecond))
	time.Sleep(time.Until(stopped.Add(down))) // about time: the outage's length
	if strings.Contains(a.output(), "which heard no server for longer than the heartbeat timeout") {
		t.Errorf("the agent fenced a run during the outage")
	}
	pg.start()
	for _, id := range ids {
		alice.waitState(id, time.Minute, "succeeded")
	}
	runs := make(map[int64]int)
	for _, sp := range checkTraces(t, traces) {
		runs[sp.job]++
		if sp.run != 1 {
			t.Errorf("%v: want each job's first run only", sp)
		}
	}
	for _, id := range ids {
		if runs[id] != 1 {
			t.Errorf("job %d traced %d runs, want 1", id, runs[id])
		}
	}
	endsOnce(t, alice, ids...)
	if n := sup.starts(); n != 1 {
		t.Errorf("the server started %d times; want once", n)
	}
}

// faultServerRestartedDuringDatabaseOutage (issue 32): the database
// stops, and while it is out the server is killed (SIGKILL) and started
// again by its supervisor. The new process cannot check the agent's
// credential with the database: it lets the agent back in on the record
// of the credentials it checked before, kept (hashed) in its data folder,
// and rides the rest of the outage out fenced, so the agent keeps its
// runs. Once the database is back it takes the lock, adopts the runs and
// records their ends: each job ran once, its first run, and succeeded.
func faultServerRestartedDuringDatabaseOutage(t *testing.T) {
	pg := startPrivatePG(t)
	data, traces := t.TempDir(), t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	const timeout = 5 * time.Second // T: the restart must fit in the agents' lease
	sup := supervise(t, "serve", "--dev", "--addr", addr, "--no-local-agent", "--agent-token", agentToken,
		"--data", data, "--db", pg.DSN(), "--heartbeat-timeout", timeout.String(), "--grace", faultGrace,
		"--max-retries", "0", "--policy", "fifo")
	base := "http://" + addr
	eventually(t, 30*time.Second, "the server to answer", func() bool { return role(base) == "leader" })
	a := startAgent(t, base, "kept") // 2 GPUs
	waitGPUs(t, base, 2)
	alice := newAPI(t, base, "alice", "dev")
	const down = 2 * timeout
	var ids []int64
	for i := range 2 {
		ids = append(ids, submit(t, alice, map[string]any{"name": fmt.Sprint("kept-", i), "gpus": 1,
			"command": tracedJob(traces, int((down+4*time.Second)/tick))}))
	}
	for _, id := range ids {
		traceStarted(t, traces, id, "")
	}
	pg.stop()
	stopped := time.Now()
	const connected = `msg="connected to the server"`
	before := strings.Count(a.output(), connected)
	sup.kill()
	eventually(t, 2*timeout, "the restarted server to take the agent back", func() bool {
		return sup.starts() == 2 && strings.Count(a.output(), connected) > before
	})
	t.Logf("the agent was back on the restarted server %v into the outage", time.Since(stopped).Round(time.Millisecond))
	if m := metric(t, base, "gpuportal_leader_fenced"); m != "1" {
		t.Errorf("gpuportal_leader_fenced = %q on the server restarted during the outage; want 1", m)
	}
	time.Sleep(time.Until(stopped.Add(down))) // about time: the outage's length
	if strings.Contains(a.output(), "which heard no server for longer than the heartbeat timeout") {
		t.Errorf("the agent fenced a run during the outage")
	}
	pg.start()
	for _, id := range ids {
		alice.waitState(id, time.Minute, "succeeded")
	}
	runs := make(map[int64]int)
	for _, sp := range checkTraces(t, traces) {
		runs[sp.job]++
		if sp.run != 1 {
			t.Errorf("%v: want each job's first run only", sp)
		}
	}
	for _, id := range ids {
		if runs[id] != 1 {
			t.Errorf("job %d traced %d runs, want 1", id, runs[id])
		}
	}
	endsOnce(t, alice, ids...)
	if n := sup.starts(); n != 2 {
		t.Errorf("the server started %d times; want twice (the kill)", n)
	}
}

// faultDatabaseOutageLongerThanTheHold (issue 32): the database stays
// out past --db-outage-hold. The leader steps down to a follower without
// exiting: it drops its agent, which fences its run (the cost of a step
// down, a rerun, never a failure). Once the database is back the same
// process leads again, takes the agent back and finishes the job, which
// succeeds, and runs a new one.
func faultDatabaseOutageLongerThanTheHold(t *testing.T) {
	pg := startPrivatePG(t)
	data, traces := t.TempDir(), t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	sup := supervise(t, "serve", "--dev", "--addr", addr, "--no-local-agent", "--agent-token", agentToken,
		"--data", data, "--db", pg.DSN(), "--heartbeat-timeout", faultTimeout, "--grace", faultGrace,
		"--max-retries", "0", "--policy", "fifo", "--db-outage-hold", "3s")
	base := "http://" + addr
	eventually(t, 30*time.Second, "the server to answer", func() bool { return role(base) == "leader" })
	a := startAgent(t, base, "held")
	waitGPUs(t, base, 2)
	alice := newAPI(t, base, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "outlasted", "gpus": 1, "command": tracedJob(traces, 40)})
	traceStarted(t, traces, id, "")
	pg.stop()
	eventually(t, 20*time.Second, "the leader to step down to a follower", func() bool {
		// /healthz names no role while the database is out: the gauges do.
		return strings.Contains(sup.output(), "stepped down") &&
			metric(t, base, "gpuportal_leader") == "0" && metric(t, base, "gpuportal_leader_fenced") == "0"
	})
	eventually(t, 20*time.Second, "the agent to fence its run", func() bool {
		return strings.Contains(a.output(), "which heard no server for longer than the heartbeat timeout")
	})
	pg.start()
	eventually(t, 30*time.Second, "the server to lead again", func() bool { return role(base) == "leader" })
	waitGPUs(t, base, 2)
	alice.waitState(id, time.Minute, "succeeded")
	next := submit(t, alice, map[string]any{"name": "after", "gpus": 1, "command": tracedJob(traces, 4)})
	alice.waitState(next, 30*time.Second, "succeeded")
	checkTraces(t, traces)
	endsOnce(t, alice, id, next)
	if n := sup.starts(); n != 1 {
		t.Errorf("the server started %d times; want once: it steps down and leads again without exiting", n)
	}
}

// dbOutage stops the database for down while two jobs run through the
// outage, two end during it and one waits for a GPU, and checks what the
// server answers meanwhile and after. It returns the jobs, all succeeded.
func dbOutage(t *testing.T, pg *privatePG, base string, alice *api, traces string, round int, down time.Duration) []int64 {
	t.Helper()
	ticks := func(d time.Duration) int { return int(d / tick) }
	var through, during []int64
	for i := range 2 {
		through = append(through, submit(t, alice, map[string]any{"name": fmt.Sprintf("through-%d-%d", round, i), "gpus": 1,
			"command": tracedJob(traces, ticks(down+8*time.Second))}))
	}
	for i := range 2 {
		during = append(during, submit(t, alice, map[string]any{"name": fmt.Sprintf("ends-%d-%d", round, i), "gpus": 1,
			"command": tracedJob(traces, ticks(down/2))}))
	}
	waiting := submit(t, alice, map[string]any{"name": fmt.Sprintf("waits-%d", round), "gpus": 1, "command": tracedJob(traces, 8)})
	for _, id := range append(slices.Clone(through), during...) {
		traceStarted(t, traces, id, "")
	}
	pg.stop()
	stopped := time.Now()

	key := fmt.Sprintf("outage-%d", round)
	body := map[string]any{"name": key, "gpus": 1, "command": tracedJob(traces, 4)}
	var refusal string
	eventually(t, 10*time.Second, "a submission refused for the outage", func() bool {
		st, msg, _ := postKeyed(t, base, alice.token, key, body)
		refusal = msg
		return st == http.StatusServiceUnavailable && strings.Contains(msg, "database is unreachable since")
	})
	t.Logf("refused: %s", refusal)
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct{ Status, Cause string }
	_ = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(ready.Cause, "database unreachable since") || resp.Header.Get("X-Data-Age") == "" {
		t.Errorf("/readyz during the outage: %d %+v, X-Data-Age %q; want 503 naming the cause, with the data's age",
			resp.StatusCode, ready, resp.Header.Get("X-Data-Age"))
	}
	// A read served from memory says how old its data is.
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Data-Age") == "" {
		t.Errorf("/metrics during the outage: %d, X-Data-Age %q; want 200 with the data's age", resp.StatusCode, resp.Header.Get("X-Data-Age"))
	}

	// The leader, fenced, says it is still the leader, and fenced.
	eventually(t, 10*time.Second, "gpuportal_leader 1 and gpuportal_leader_fenced 1 during the outage", func() bool {
		return metric(t, base, "gpuportal_leader") == "1" && metric(t, base, "gpuportal_leader_fenced") == "1"
	})

	time.Sleep(time.Until(stopped.Add(down))) // about time: the outage's length
	pg.start()
	back := time.Now()
	var keyed int64
	for keyed == 0 {
		st, _, j := postKeyed(t, base, alice.token, key, body)
		switch {
		case st == http.StatusCreated:
			keyed = j.ID
		case time.Since(back) > time.Minute:
			t.Fatalf("submissions still refused a minute after the database came back: %d", st)
		default:
			time.Sleep(50 * time.Millisecond) // about time: a client's retry
		}
	}
	t.Logf("database down %v: a submission was accepted again %v after it was back", down, time.Since(back).Round(time.Millisecond))
	if st, _, j := postKeyed(t, base, alice.token, key, body); st != http.StatusCreated || j.ID != keyed {
		t.Errorf("the keyed submission again: %d, job %d; want job %d", st, j.ID, keyed)
	}
	eventually(t, 10*time.Second, "the server to lead", func() bool { return role(base) == "leader" })
	eventually(t, 10*time.Second, "gpuportal_leader 1 and gpuportal_leader_fenced 0 after the outage", func() bool {
		return metric(t, base, "gpuportal_leader") == "1" && metric(t, base, "gpuportal_leader_fenced") == "0"
	})

	ids := slices.Concat(through, during, []int64{waiting, keyed})
	for _, id := range ids {
		alice.waitState(id, time.Minute, "succeeded")
	}
	spans := readTraces(t, traces)
	ended := 0 // of the jobs during, those whose own last line came in the outage
	for _, id := range during {
		// It ended while the database was out: its exit was held, and
		// recorded once the database was back, at the time it ended. What
		// the job traced says when that was: on a loaded machine a job
		// sized to end halfway through the outage may outlive it.
		var last time.Time
		for _, s := range spans {
			if s.job == id && s.last.After(last) {
				last = s.last
			}
		}
		j := alice.job(id)
		if last.Before(back) {
			ended++
			if j.FinishedAt == nil || !j.FinishedAt.Before(back) || j.FinishedAt.Before(stopped) {
				t.Errorf("job %d finished at %v, its last line at %s; want during the outage (%s to %s)", id, j.FinishedAt,
					last.Format("15:04:05.000"), stopped.Format("15:04:05.000"), back.Format("15:04:05.000"))
			}
		}
		if j.FinishedAt == nil || j.FinishedAt.Before(last) || j.FinishedAt.After(last.Add(tick+2*time.Second)) {
			t.Errorf("job %d finished at %v; want at its last line (%s) or within a tick and 2 s of it",
				id, j.FinishedAt, last.Format("15:04:05.000"))
		}
	}
	if ended == 0 {
		t.Errorf("none of jobs %v traced its last line during the %v outage (%s to %s): no exit was held, nothing checked",
			during, down, stopped.Format("15:04:05.000"), back.Format("15:04:05.000"))
	}
	for _, s := range spans {
		if s.job == waiting && s.first.Before(back) {
			t.Errorf("job %d started at %s, while the database was out (back at %s)", waiting,
				s.first.Format("15:04:05.000"), back.Format("15:04:05.000"))
		}
	}
	return ids
}

// postKeyed submits body with an Idempotency-Key and returns the status,
// the error message of a refusal and the job of an acceptance.
func postKeyed(t *testing.T, base, token, key string, body map[string]any) (int, string, jobView) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/jobs", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error(), jobView{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var j jobView
	var e struct{ Error string }
	if resp.StatusCode == http.StatusCreated {
		_ = json.Unmarshal(raw, &j)
	} else {
		_ = json.Unmarshal(raw, &e)
	}
	return resp.StatusCode, e.Error, j
}

// supervisor runs the gpuportal binary with args again each time it
// exits, as systemd would, until the test ends.
type supervisor struct {
	mu    sync.Mutex
	n     int
	out   strings.Builder
	cmd   *exec.Cmd
	ended bool
}

func supervise(t *testing.T, args ...string) *supervisor {
	t.Helper()
	for i, a := range args[:len(args)-1] {
		if a == "--addr" {
			checkServer(t, "http://"+args[i+1])
		}
	}
	s := &supervisor{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			cmd := exec.Command(binary, args...)
			cmd.Stdout, cmd.Stderr = &lockedWriter{s}, &lockedWriter{s}
			s.mu.Lock()
			if s.ended {
				s.mu.Unlock()
				return
			}
			s.cmd = cmd
			s.n++
			err := cmd.Start()
			s.mu.Unlock()
			if err == nil {
				_ = cmd.Wait()
			}
			time.Sleep(300 * time.Millisecond) // about time: systemd's RestartSec, between restarts
		}
	}()
	t.Cleanup(func() {
		s.mu.Lock()
		s.ended = true
		if s.cmd != nil && s.cmd.Process != nil {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
		}
		s.mu.Unlock()
		<-done
		if t.Failed() {
			t.Logf("supervised gpuportal output:\n%s", s.output())
		}
	})
	return s
}

// kill kills the running process with SIGKILL; the supervisor starts it
// again.
func (s *supervisor) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
}

func (s *supervisor) starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *supervisor) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

type lockedWriter struct{ s *supervisor }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.out.Write(p)
}

// faultTwoAgentsOneName starts a second agent under the name of a
// machine that runs a job (two machines cloned from one image): it is
// refused with a message naming the cause, the first keeps its machine and
// its job, and nothing flaps.
func faultTwoAgentsOneName(t *testing.T) {
	data, traces := t.TempDir(), t.TempDir()
	srv := faultServer(t, data)
	oneGPUAgent(t, srv.URL, "twin")
	waitGPUs(t, srv.URL, 1)
	alice := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, alice, map[string]any{"name": "cloned", "gpus": 1, "command": tracedJob(traces, 24)})
	traceStarted(t, traces, id, "twin")
	clone := oneGPUAgent(t, srv.URL, "twin")
	eventually(t, 15*time.Second, "the clone to be refused", func() bool {
		return strings.Contains(clone.output(), "machine name twin is taken by another machine")
	})
	alice.waitState(id, 30*time.Second, "succeeded")
	spans := checkTraces(t, traces)
	endsOnce(t, alice, id)
	if len(spans) != 1 {
		t.Errorf("%d runs, want the job's one run, undisturbed", len(spans))
	}
	if n := strings.Count(srv.output(), `nodes=[twin]`); n != 1 {
		t.Errorf("twin connected %d times, want once (no flapping)", n)
	}
}

// faultJoinTokens: an admin's join token lets a new machine join, which
// then reconnects with its own credential even after the token is
// revoked; a revoked token lets no new machine in; wrong tokens are
// refused, then rate-limited.
func faultJoinTokens(t *testing.T) {
	data := t.TempDir()
	srv := startServer(t, "--data", data, "--no-local-agent", "--heartbeat-timeout", faultTimeout)
	admin := func(args ...string) string {
		out, err := exec.Command(binary, append([]string{"admin", "--data", data}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("admin %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := admin("create-join-token", "--name", "rack 3", "--ttl", "1h")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	token := lines[len(lines)-1]
	if !strings.HasPrefix(token, "gpj_") {
		t.Fatalf("create-join-token printed %q", out)
	}
	work := t.TempDir()
	a := startAgentWithToken(t, srv.URL, "rack3-a", token, "--work-dir", work)
	waitGPUs(t, srv.URL, 2)
	// The agent keeps the machine's credential in its work folder.
	if cred, err := os.ReadFile(filepath.Join(work, "credential")); err != nil || !strings.HasPrefix(string(cred), "gpm_") {
		t.Fatalf("credential kept: %q, %v", cred, err)
	} else if strings.Contains(srv.output()+a.output(), strings.TrimSpace(string(cred))) {
		t.Error("the machine's credential appears in a log")
	}
	if got := admin("list-machines"); !strings.Contains(got, "rack3-a") || !strings.Contains(got, "join token 1") {
		t.Errorf("list-machines:\n%s", got)
	}
	admin("revoke-join-token", "--id", "1")
	a.kill()
	// Its credential still works; the token no longer lets anyone join.
	startAgentWithToken(t, srv.URL, "rack3-a", token, "--work-dir", work)
	waitGPUs(t, srv.URL, 2)
	newcomer := startAgentWithToken(t, srv.URL, "rack3-b", token)
	eventually(t, 10*time.Second, "the revoked token to be refused", func() bool {
		return strings.Contains(newcomer.output(), "401 Unauthorized")
	})
	if g := connectedGPUs(t, srv.URL); g != 2 {
		t.Errorf("%d GPUs connected, want rack3-a's 2 only", g)
	}
	if got := admin("audit"); !strings.Contains(got, "join-token.create") || !strings.Contains(got, "join-token.revoke") {
		t.Errorf("audit lacks the join token actions:\n%s", got)
	}
	// Wrong tokens: refused, and after ten from one address (the
	// newcomer's included), answered 429.
	codes := map[int]int{}
	for range 12 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/agents/connect", nil)
		req.Header.Set("Authorization", "Bearer gpj_wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	if codes[http.StatusUnauthorized] < 8 || codes[http.StatusTooManyRequests] < 2 || codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests] != 12 {
		t.Errorf("answers to 12 wrong tokens: %v, want 401 until ten failures, then 429", codes)
	}
}
