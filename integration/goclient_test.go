package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apitypes "github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/gpuportal/gpuportal/core/job"
)

// goClient is the Go client (package client) of the server at base as
// user; its exchanges go through http.DefaultTransport, which TestMain
// checks against web/openapi.json.
func goClient(t *testing.T, base, user, password string) *client.Client {
	t.Helper()
	return (&api{t: t, base: base, token: goClientToken(t, base, user, password)}).client()
}

// goClientToken gets a new API token of user with HTTP basic auth.
func goClientToken(t testing.TB, base, user, password string) string {
	t.Helper()
	anon, err := client.New(base, "", client.WithHTTPClient(http.DefaultClient))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := anon.CreateToken(withReporter(context.Background(), t), user, password)
	if err != nil {
		t.Fatalf("token for %s: %v", user, err)
	}
	return tok.Token
}

// TestGoClient drives the Go client against the real server: submit,
// get, list page after page, history, a refusal naming its field, logs
// followed by offset to the job's end, cancel, and the cluster's
// queues, machines and teams.
func TestGoClient(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--grace", "2s", "--max-retries", "0")
	ctx := withReporter(context.Background(), t)
	cl := goClient(t, srv.URL, "alice", "dev")

	me, err := cl.Me(ctx)
	if err != nil || me.Name != "alice" || me.Team != "vision" {
		t.Fatalf("Me = %+v, %v", me, err)
	}
	if v, err := cl.Version(ctx); err != nil || v.Version == "" {
		t.Errorf("Version = %+v, %v", v, err)
	}

	// A refusal names the field at fault (the request is malformed on
	// purpose: see malformedRequest).
	_, err = cl.Submit(context.WithValue(ctx, malformedKey{}, true), apitypes.SubmitRequest{Name: "bad", GPUs: 0, Sim: &apitypes.SimSpec{DurationS: 5}})
	if client.StatusOf(err) != http.StatusBadRequest || client.FieldOf(err) != "gpus" {
		t.Errorf("a submission of 0 GPUs: %v (status %d, field %q); want a 400 naming gpus", err, client.StatusOf(err), client.FieldOf(err))
	}

	// A job whose output grows while it is followed, from before it
	// starts: every line once, in order, then the job ended.
	j, err := cl.Submit(ctx, apitypes.SubmitRequest{Name: "counter", GPUs: 1,
		Command: apitypes.Command{"sh", "-c", `for i in 1 2 3 4 5; do echo "line $i"; sleep 0.3; done`}})
	if err != nil || j.ID == 0 {
		t.Fatalf("Submit = %+v, %v", j, err)
	}
	var out bytes.Buffer
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	end, err := cl.FollowLogs(fctx, j.ID, &out, client.Follow{Tail: 1 << 20, Interval: 100 * time.Millisecond})
	if err != nil || end.State != job.Succeeded {
		t.Fatalf("FollowLogs = %s, %v; output %q", end.State, err, out.String())
	}
	if want := "line 1\nline 2\nline 3\nline 4\nline 5\n"; out.String() != want {
		t.Errorf("followed output %q, want %q", out.String(), want)
	}
	if tail, err := cl.LogTail(ctx, j.ID, 7); err != nil || string(tail) != "line 5\n" {
		t.Errorf("LogTail(7) = %q, %v", tail, err)
	}
	if ch, err := cl.LogsFrom(ctx, j.ID, 7); err != nil || ch.Size != 35 || string(ch.Data) != out.String()[7:] {
		t.Errorf("LogsFrom(7) = %q (size %d), %v", ch.Data, ch.Size, err)
	}
	h, err := cl.History(ctx, j.ID)
	if err != nil || len(h) < 3 || h[len(h)-1].State != job.Succeeded {
		t.Errorf("History = %+v, %v", h, err)
	}

	// Simulated jobs, listed a page at a time, one cancelled.
	var ids []int64
	for i := range 3 {
		s, err := cl.Submit(ctx, apitypes.SubmitRequest{Name: fmt.Sprintf("sim-%d", i), GPUs: 1, Sim: &apitypes.SimSpec{DurationS: 600}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	all, err := cl.AllJobs(ctx, client.JobQuery{Scope: "mine", Limit: 1})
	if err != nil || len(all) != 4 {
		t.Fatalf("AllJobs a job a page = %d jobs, %v; want 4", len(all), err)
	}
	page, err := cl.Jobs(ctx, client.JobQuery{Scope: "mine", Limit: 2, Text: "sim-"})
	if err != nil || len(page.Jobs) != 2 || page.Next == "" {
		t.Errorf("Jobs limit 2 = %d jobs, next %q, %v; want a full page and a cursor", len(page.Jobs), page.Next, err)
	}
	c, err := cl.Cancel(ctx, ids[0])
	if err != nil || c.ID != ids[0] {
		t.Errorf("Cancel = %+v, %v", c, err)
	}
	if _, err := cl.Job(ctx, 999999); !client.IsNotFound(err) {
		t.Errorf("Job(999999) = %v, want a 404", err)
	}

	q, err := cl.Queues(ctx, client.QueueQuery{})
	if err != nil || q.Policy == "" || len(q.Queues) == 0 {
		t.Errorf("Queues = %+v, %v", q, err)
	}
	nodes, err := cl.Nodes(ctx)
	if err != nil || len(nodes) == 0 || len(nodes[0].GPUs) == 0 {
		t.Errorf("Nodes = %+v, %v", nodes, err)
	}
	teams, err := cl.Teams(ctx)
	if err != nil || !slices.ContainsFunc(teams, func(ts apitypes.TeamShare) bool { return ts.Name == "vision" }) {
		t.Errorf("Teams = %+v, %v", teams, err)
	}
	if tm, err := cl.Team(ctx, "vision"); err != nil || tm.Name != "vision" {
		t.Errorf("Team(vision) = %+v, %v", tm.Name, err)
	}
}

// lockedBuffer is a buffer a process writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCLIFollowAndWatch runs logs -f, get --watch and list --watch of
// the real binary against the real server: the output of a job that
// writes as it runs, shown once in order from before it starts; a job's
// states as they change, until it ends; and a list watched until the
// user stops it.
func TestCLIFollowAndWatch(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--grace", "2s", "--max-retries", "0")
	c := newCLI(t, srv.URL)
	env := []string{"GPUPORTAL_TOKEN=" + newAPI(t, srv.URL, "alice", "dev").token}

	id := strings.TrimSpace(c.ok(env, "job", "submit", "--parsable", "--name", "counter", "--",
		"sh", "-c", `for i in 1 2 3 4 5; do echo "line $i"; sleep 0.3; done`))
	logs, errOut, code := c.run(env, "job", "logs", "-f", "--interval", "100ms", id)
	if want := "line 1\nline 2\nline 3\nline 4\nline 5\n"; code != 0 || logs != want || !strings.Contains(errOut, "job "+id+" succeeded (exit code 0)") {
		t.Errorf("logs -f: exit %d, output %q (want %q)\nstderr:\n%s", code, logs, want, errOut)
	}

	// get --watch: a row each time the job's state changes, until it ends.
	id = strings.TrimSpace(c.ok(env, "job", "submit", "--parsable", "--name", "short", "--sim-duration", "3s"))
	out := c.ok(env, "job", "get", id, "--watch", "--interval", "200ms")
	var states []string
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 5 && f[0] != "ID" {
			if f[0] != id {
				t.Errorf("get %s --watch printed job %s", id, f[0])
			}
			states = append(states, f[5])
		}
	}
	if len(states) < 2 || states[len(states)-1] != "succeeded" || !slices.Contains(states, "running") {
		t.Errorf("get --watch showed states %q, want running then succeeded:\n%s", states, out)
	}
	if out := c.ok(env, "job", "get", id, "-o", "name"); out != "job/"+id+"\n" {
		t.Errorf("get -o name = %q", out)
	}

	// list --watch: a job submitted after it began shows once it runs
	// (in its first list, or as a change); interrupted, the watch ends
	// without an error.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "job", "list", "--watch", "--interval", "200ms", "--state", "running", "-o", "name")
	cmd.Env = append(append([]string{}, c.env...), env...)
	var watched, watchErr lockedBuffer
	cmd.Stdout, cmd.Stderr = &watched, &watchErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	late := strings.TrimSpace(c.ok(env, "job", "submit", "--parsable", "--name", "late", "--sim-duration", "10m"))
	eventually(t, 30*time.Second, "list --watch to show job "+late+" running", func() bool {
		return regexp.MustCompile(`(?m)^job/` + late + `$`).MatchString(watched.String())
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("list --watch, interrupted: %v\nstderr:\n%s", err, watchErr.String())
	}
}
