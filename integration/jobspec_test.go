package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/client"
)

// Jobs as researchers write them (issue 18), on one server: a job's own
// variables and working folder, a time limit, an array with a limit on
// how many tasks run at once, and a chain of dependencies. Each is judged
// by what the jobs themselves printed.
func TestJobSpec(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--grace", "1s", "--policy", "fifo", "--webhook-allow", webhookAllow)
	a := newAPI(t, srv.URL, "alice", "dev")
	c := newCLI(t, srv.URL)
	cliEnv := []string{"GPUPORTAL_TOKEN=" + a.token}
	var wg sync.WaitGroup
	run := func(name string, f func(t *testing.T)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(name, f)
		}()
	}
	// The cases wait on jobs, not on each other: run them side by side.
	t.Run("group", func(t *testing.T) {
		run("env and chdir", func(t *testing.T) { testEnvAndChdir(t, a, c, cliEnv) })
		run("time limit", func(t *testing.T) { testTimeLimit(t, a) })
		run("array", func(t *testing.T) { testArray(t, a) })
		run("dependencies", func(t *testing.T) { testDependencies(t, a, c, cliEnv) })
		wg.Wait()
	})
	t.Run("team time limits", func(t *testing.T) { testTeamTimeLimits(t, srv.URL, a, c, cliEnv) })
}

// testTeamTimeLimits: the lead sets the team's default and longest time
// limit; a job without one gets the default, one beyond the longest is
// refused naming the field, or the flag.
func testTeamTimeLimits(t *testing.T, base string, a *api, c *cli, cliEnv []string) {
	lead := newAPI(t, base, "lead", "dev")
	if st := lead.do(http.MethodPut, "/api/v1/teams/vision/time-limits", map[string]string{"default_time_limit": "1h", "max_time_limit": "2h"}, nil); st != http.StatusOK {
		t.Fatalf("set time limits: %d", st)
	}
	own := *a
	own.t = t
	var j struct {
		ID         int64
		TimeLimitS *float64 `json:"time_limit_s"`
	}
	if st := own.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "d", "gpus": 1, "sim": map[string]any{"duration_s": 1}}, &j); st != http.StatusCreated ||
		j.TimeLimitS == nil || *j.TimeLimitS != 3600 {
		t.Errorf("a job without a limit: %d, %+v; want the team's default of 1h", st, j)
	}
	var e struct{ Error string }
	if st := own.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "d", "gpus": 1, "sim": map[string]any{"duration_s": 1}, "time_limit": "3h"}, &e); st != http.StatusBadRequest ||
		!strings.HasPrefix(e.Error, "time_limit: team vision allows at most 02:00:00") {
		t.Errorf("a job beyond the team's longest: %d %q", st, e.Error)
	}
	cc := *c
	cc.t = t
	cc.fails(cliEnv, []string{"time_limit: team vision allows at most 02:00:00", "Fix --time"}, "job", "submit", "--name", "x", "--time", "1-00:00:00", "--", "true")
}

// submit posts a job and returns its ID.
func submitJob(t *testing.T, a *api, body map[string]any) int64 {
	t.Helper()
	var j jobView
	own := *a
	own.t = t
	if st := own.do(http.MethodPost, "/api/v1/jobs", body, &j); st != http.StatusCreated {
		t.Fatalf("submit %v: status %d", body, st)
	}
	return j.ID
}

// apiJobLog is a job's output, read through the API: "" for a job that
// has none (it never ran).
func apiJobLog(t *testing.T, a *api, id int64) string {
	t.Helper()
	b, err := a.client().LogTail(withReporter(context.Background(), t), id, client.MaxLogTail)
	switch {
	case client.IsNotFound(err):
		return ""
	case err != nil:
		t.Fatalf("output of job %d: %v", id, err)
	}
	return string(b)
}

// waitJob waits for job id to reach one of states, with its own client.
func waitJob(t *testing.T, a *api, id int64, timeout time.Duration, states ...string) jobView {
	t.Helper()
	own := *a
	own.t = t
	return own.waitState(id, timeout, states...)
}

func testEnvAndChdir(t *testing.T, a *api, c *cli, cliEnv []string) {
	dir := t.TempDir()
	own := *c
	own.t = t
	c = &own
	out := c.ok(cliEnv, "job", "submit", "--name", "env", "--env", "LR=3e-4", "--env", "GREETING=hello world", "--chdir", dir, "--",
		"sh", "-c", `echo "LR=$LR GREETING=$GREETING pwd=$(pwd) index=${GPUPORTAL_ARRAY_INDEX-none}"`)
	var id int64
	if _, err := fmt.Sscanf(out, "job %d submitted", &id); err != nil {
		t.Fatalf("submit printed %q", out)
	}
	waitJob(t, a, id, 30*time.Second, "succeeded", "failed")
	if got, want := apiJobLog(t, a, id), fmt.Sprintf("LR=3e-4 GREETING=hello world pwd=%s index=none\n", dir); got != want {
		t.Errorf("the job printed %q; want %q", got, want)
	}
	// Reserved and invalid names are refused, naming the flag or field.
	c.fails(cliEnv, []string{"GPUPORTAL_JOB_ID is set by gpuportal"}, "job", "submit", "--name", "x", "--env", "GPUPORTAL_JOB_ID=1", "--", "true")
	var e struct{ Error string }
	ownAPI := *a
	ownAPI.t = t
	if st := ownAPI.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "x", "gpus": 1, "command": "true", "env": map[string]string{"9LIVES": "x"}}, &e); st != http.StatusBadRequest || !strings.HasPrefix(e.Error, "env: ") {
		t.Errorf("invalid name: status %d, %q", st, e.Error)
	}
}

func testTimeLimit(t *testing.T, a *api) {
	// Its owner asked to be told of jobs that time out (notify18).
	h := newHook(t, "s3cret", func(int) int { return http.StatusOK })
	own := *a
	own.t = t
	if st := own.do(http.MethodPut, "/api/v1/me/notifications", map[string]any{"webhook_url": h.srv.URL + "/hook", "webhook_secret": "s3cret",
		"events": []string{"timed_out"}}, nil); st != http.StatusOK {
		t.Fatalf("notification settings: %d", st)
	}
	// On SIGTERM it says so and keeps going: SIGKILL ends it after the
	// grace period (1s).
	script := `trap 'echo "got TERM"; while :; do echo "alive after TERM"; sleep 0.2; done' TERM; echo started; while :; do sleep 0.1; done`
	id := submitJob(t, a, map[string]any{"name": "limited", "gpus": 1, "command": []string{"sh", "-c", script}, "time_limit": "2s"})
	j := waitJob(t, a, id, 30*time.Second, "timed_out", "failed", "succeeded", "cancelled")
	if j.State != "timed_out" || !strings.Contains(j.Reason, "time limit 00:00:02 reached") {
		t.Fatalf("state %s, reason %q; want timed_out at its limit", j.State, j.Reason)
	}
	out := apiJobLog(t, a, id)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	alive := strings.Count(out, "alive after TERM")
	// SIGTERM came (to the whole process group: sh may say its sleep was
	// "Terminated"), the job ran on through the grace period (about 5
	// lines in 1s), and nothing it printed says it ended on its own.
	if len(lines) < 3 || lines[0] != "started" || !strings.Contains(out, "\ngot TERM\nalive after TERM\n") || alive < 2 || lines[len(lines)-1] != "alive after TERM" {
		t.Errorf("the job printed %q; want started, got TERM, then lines through the grace period until SIGKILL", out)
	}
	// Timed out once: one run, one timed_out in its history.
	var history []struct{ State string }
	own.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/history", id), nil, &history)
	n := 0
	for _, e := range history {
		if e.State == "timed_out" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("history %v: want one timed_out", history)
	}
	// Its owner is told, once, by the state's own name.
	eventually(t, 20*time.Second, "the timed_out notification", func() bool { return len(h.requests()) > 0 })
	if r := h.requests(); len(r) != 1 || !r[0].verified || !strings.Contains(r[0].body, `"event":"timed_out"`) ||
		!strings.Contains(r[0].body, fmt.Sprint(id)) {
		t.Errorf("webhook requests %+v; want one signed timed_out of job %d", r, id)
	}
}

func testArray(t *testing.T, a *api) {
	dir := t.TempDir()
	// Each task traces its start and end, with its index and parameter,
	// into one file: the trace shows how many ran at once.
	script := `echo "start $GPUPORTAL_ARRAY_INDEX $LR $(date +%s.%N)" >> trace; sleep 1; echo "end $GPUPORTAL_ARRAY_INDEX $LR $(date +%s.%N)" >> trace; echo "task $GPUPORTAL_ARRAY_INDEX of $GPUPORTAL_ARRAY_JOB_ID LR=$LR"`
	params := "LR\n0.1\n0.2\n0.3\n0.4\n0.5\n0.6\n"
	var first struct {
		ID    int64
		Array struct{ ID, Index, Limit int64 }
	}
	own := *a
	own.t = t
	if st := own.do(http.MethodPost, "/api/v1/jobs", map[string]any{"name": "sweep", "gpus": 1, "command": []string{"sh", "-c", script},
		"workdir": dir, "array": "0-5%2", "array_params": params}, &first); st != http.StatusCreated || first.Array.ID != first.ID || first.Array.Limit != 2 {
		t.Fatalf("submit the array: status %d, %+v", st, first)
	}
	// A job after the array (its ID, as in Slurm) waits for every task.
	after := submitJob(t, a, map[string]any{"name": "after-sweep", "gpus": 1, "command": []string{"true"},
		"dependencies": []map[string]any{{"kind": "after_ok", "job_id": first.ID}}})
	var arr struct {
		States map[string]int
		Tasks  []struct {
			ID       int64
			State    string
			ExitCode *int     `json:"exit_code"`
			JCTS     *float64 `json:"jct_s"`
			Array    struct{ Index int }
		}
	}
	maxRunning := 0
	eventually(t, 60*time.Second, "the array to end", func() bool {
		own.do(http.MethodGet, fmt.Sprintf("/api/v1/arrays/%d", first.ID), nil, &arr)
		maxRunning = max(maxRunning, arr.States["running"])
		return arr.States["succeeded"]+arr.States["failed"]+arr.States["cancelled"] == 6
	})
	if arr.States["succeeded"] != 6 || maxRunning > 2 {
		t.Errorf("states %v, at most %d running seen; want 6 succeeded, never more than 2 running", arr.States, maxRunning)
	}
	for i, task := range arr.Tasks {
		if task.Array.Index != i || task.ExitCode == nil || *task.ExitCode != 0 || task.JCTS == nil {
			t.Errorf("task %d: %+v", i, task)
		}
		want := fmt.Sprintf("task %d of %d LR=0.%d\n", i, first.ID, i+1)
		if got := apiJobLog(t, a, task.ID); got != want {
			t.Errorf("task %d printed %q; want %q", i, got, want)
		}
	}
	last := time.Time{}
	for _, task := range arr.Tasks {
		if j := own.job(task.ID); j.FinishedAt != nil && j.FinishedAt.After(last) {
			last = *j.FinishedAt
		}
	}
	if j := waitJob(t, a, after, 30*time.Second, "succeeded", "failed", "cancelled"); j.State != "succeeded" || j.StartedAt == nil || j.StartedAt.Before(last) {
		t.Errorf("the job after the array: %s, started %v; want it to run after the last task ended (%v)", j.State, j.StartedAt, last)
	}
	b, err := os.ReadFile(filepath.Join(dir, "trace"))
	if err != nil {
		t.Fatal(err)
	}
	type event struct {
		at    float64
		delta int
	}
	var events []event
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			t.Fatalf("trace line %q", line)
		}
		at, _ := strconv.ParseFloat(f[3], 64)
		d := 1
		if f[0] == "end" {
			d = -1
		} else {
			seen[f[1]+" "+f[2]] = true
		}
		events = append(events, event{at, d})
	}
	sort.Slice(events, func(i, j int) bool {
		if events[i].at != events[j].at {
			return events[i].at < events[j].at
		}
		return events[i].delta < events[j].delta // ends first
	})
	now, most := 0, 0
	for _, e := range events {
		now += e.delta
		most = max(most, now)
	}
	if most > 2 || len(seen) != 6 {
		t.Errorf("the tasks' trace shows %d running at once and %d distinct tasks; want at most 2, and 6:\n%s", most, len(seen), b)
	}
}

func testDependencies(t *testing.T, a *api, c *cli, cliEnv []string) {
	okA := submitJob(t, a, map[string]any{"name": "A", "gpus": 1, "command": []string{"sh", "-c", "sleep 6; echo A done"}})
	ownCLI := *c
	ownCLI.t = t
	out := ownCLI.ok(cliEnv, "job", "submit", "--name", "B", "--dependency", fmt.Sprintf("afterok:%d", okA), "--", "sh", "-c", "echo B ran")
	var okB int64
	if _, err := fmt.Sscanf(out, "job %d submitted", &okB); err != nil {
		t.Fatalf("submit printed %q", out)
	}
	failA := submitJob(t, a, map[string]any{"name": "A2", "gpus": 1, "command": []string{"sh", "-c", "sleep 1; exit 3"}})
	failB := submitJob(t, a, map[string]any{"name": "B2", "gpus": 1, "command": []string{"sh", "-c", "echo B2 ran"},
		"dependencies": []map[string]any{{"kind": "after_ok", "job_id": failA}}})

	// While A runs, B waits for it, and says so.
	own := *a
	own.t = t
	eventually(t, 20*time.Second, "B to say what it waits for", func() bool {
		return own.job(okB).Reason == fmt.Sprintf("waiting for job %d to succeed", okA)
	})
	if b := own.job(okB); b.State != "queued" || b.StartedAt != nil {
		t.Errorf("B is %s before A ended", b.State)
	}
	ja := waitJob(t, a, okA, 30*time.Second, "succeeded", "failed")
	jb := waitJob(t, a, okB, 30*time.Second, "succeeded", "failed", "cancelled")
	if ja.State != "succeeded" || jb.State != "succeeded" || jb.StartedAt == nil || jb.StartedAt.Before(*ja.FinishedAt) {
		t.Errorf("A %s (finished %v), B %s (started %v); want B to run after A succeeded", ja.State, ja.FinishedAt, jb.State, jb.StartedAt)
	}
	if got := apiJobLog(t, a, okB); got != "B ran\n" {
		t.Errorf("B printed %q", got)
	}
	// A failing A cancels B, which never ran.
	waitJob(t, a, failA, 30*time.Second, "failed")
	j := waitJob(t, a, failB, 30*time.Second, "cancelled", "succeeded", "failed")
	if j.State != "cancelled" || j.StartedAt != nil || !strings.Contains(j.Reason, fmt.Sprintf("job %d ended failed", failA)) {
		t.Errorf("B2: %s, started %v, reason %q; want cancelled without running", j.State, j.StartedAt, j.Reason)
	}
	if got := apiJobLog(t, a, failB); strings.Contains(got, "B2 ran") {
		t.Errorf("B2 ran: %q", got)
	}
}
