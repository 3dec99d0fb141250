package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/integration/genclient"
)

// genClient is the generated client on srv, sending token (if any). Its
// exchanges are checked against web/openapi.json, as every client's are
// (contractTransport).
func genClient(t *testing.T, srv *server, token string) *genclient.ClientWithResponses {
	t.Helper()
	opts := []genclient.ClientOption{genclient.WithHTTPClient(&http.Client{Timeout: 10 * time.Second})}
	if token != "" {
		opts = append(opts, genclient.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			return nil
		}))
	}
	c, err := genclient.NewClientWithResponses(srv.URL+"/api/v1", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// genLogin gets a token for user with the generated client.
func genLogin(t *testing.T, srv *server, user, password string) string {
	t.Helper()
	basic := func(_ context.Context, req *http.Request) error { req.SetBasicAuth(user, password); return nil }
	name := "generated client"
	r, err := genClient(t, srv, "").CreateTokenWithResponse(context.Background(), genclient.TokenRequest{Name: &name}, basic)
	if err != nil || r.JSON201 == nil || r.JSON201.Token == "" {
		t.Fatalf("POST /tokens as %s: %v, status %d, body %s", user, err, r.StatusCode(), r.Body)
	}
	if r.JSON201.Name != name {
		t.Errorf("token of %s named %q, want %q", user, r.JSON201.Name, name)
	}
	if !r.JSON201.ExpiresAt.After(time.Now()) {
		t.Errorf("token of %s expires at %v: in the past", user, r.JSON201.ExpiresAt)
	}
	return r.JSON201.Token
}

// TestGeneratedClient drives the real server with the client oapi-codegen
// generated from web/openapi.json (integration/genclient) and nothing
// else: log in, submit, list, read, wait, cancel, read the GPUs and the
// queues. Its typed answers are the document's promises: a required
// field arrives as a plain value, a 404 as the error the document names.
func TestGeneratedClient(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x2x40", "--max-retries", "0")
	ctx := context.Background()

	bad := func(_ context.Context, req *http.Request) error { req.SetBasicAuth("alice", "wrong"); return nil }
	if r, err := genClient(t, srv, "").CreateTokenWithResponse(ctx, genclient.TokenRequest{}, bad); err != nil || r.JSON401 == nil || r.JSON401.Error == "" {
		t.Fatalf("POST /tokens with a wrong password: %v, status %d: want 401 with an error", err, r.StatusCode())
	}
	alice := genClient(t, srv, genLogin(t, srv, "alice", "dev"))
	bob := genClient(t, srv, genLogin(t, srv, "bob", "dev"))

	submit := func(name string, seconds float64) genclient.Job {
		t.Helper()
		gpus := int64(1)
		req := genclient.SubmitRequest{Name: name, Gpus: &gpus}
		req.Sim = &struct {
			DurationS float64  `json:"duration_s"`
			UtilPct   *float64 `json:"util_pct,omitempty"`
		}{DurationS: seconds}
		key := "gen-" + name
		r, err := alice.SubmitJobWithResponse(ctx, &genclient.SubmitJobParams{IdempotencyKey: &key}, req)
		if err != nil || r.JSON201 == nil {
			t.Fatalf("submit %s: %v, status %d, body %s", name, err, r.StatusCode(), r.Body)
		}
		j := *r.JSON201
		// Sent again with its key (an answer lost), it is the same job.
		again, err := alice.SubmitJobWithResponse(ctx, &genclient.SubmitJobParams{IdempotencyKey: &key}, req)
		if err != nil || again.JSON201 == nil || again.JSON201.Id != j.Id || again.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("submit %s again with its key: %v, status %d, body %s; want job %d replayed", name, err, again.StatusCode(), again.Body, j.Id)
		}
		if j.Id == 0 || j.Name != name || j.User != "alice" || j.Team != "vision" || j.Gpus != 1 || j.Sim == nil || j.Sim.DurationS != seconds {
			t.Errorf("submitted %s: %+v", name, j)
		}
		return j
	}
	get := func(c *genclient.ClientWithResponses, id int64) *genclient.GetJobResponse {
		t.Helper()
		r, err := c.GetJobWithResponse(ctx, id)
		if err != nil {
			t.Fatalf("GET /jobs/%d: %v", id, err)
		}
		return r
	}
	waitFor := func(id int64, states ...genclient.State) genclient.Job {
		t.Helper()
		var j genclient.Job
		eventually(t, 30*time.Second, fmt.Sprintf("job %d to be %v", id, states), func() bool {
			r := get(alice, id)
			if r.JSON200 == nil {
				t.Fatalf("GET /jobs/%d: status %d, body %s", id, r.StatusCode(), r.Body)
			}
			j = *r.JSON200
			return slices.Contains(states, j.State)
		})
		return j
	}

	short := submit("short", 2)
	long := submit("long", 3600)

	list, err := alice.ListJobsWithResponse(ctx, &genclient.ListJobsParams{})
	if err != nil || list.JSON200 == nil {
		t.Fatalf("GET /jobs: %v, status %d", err, list.StatusCode())
	}
	var ids []int64
	for _, j := range *list.JSON200 {
		ids = append(ids, j.Id)
	}
	if !slices.Contains(ids, short.Id) || !slices.Contains(ids, long.Id) {
		t.Errorf("GET /jobs lists %v: want %d and %d", ids, short.Id, long.Id)
	}

	if r := get(alice, short.Id); r.JSON200 == nil || r.JSON200.Id != short.Id || r.JSON200.Name != "short" || !r.JSON200.SubmittedAt.Equal(short.SubmittedAt) {
		t.Errorf("GET /jobs/%d: status %d, body %s", short.Id, r.StatusCode(), r.Body)
	}
	if r := get(bob, short.Id); r.JSON404 == nil || !strings.Contains(r.JSON404.Error, "no such job") || strings.Contains(r.JSON404.Error, "vision") {
		t.Errorf("bob reads alice's job: status %d, body %s: want 404, no such job, naming no team", r.StatusCode(), r.Body)
	}

	done := waitFor(short.Id, genclient.StateSucceeded, genclient.StateFailed)
	if done.State != genclient.StateSucceeded || done.StartedAt == nil || done.FinishedAt == nil || done.JctS == nil || *done.JctS < 2 ||
		len(done.Placement) != 1 || !strings.HasPrefix(done.Placement[0], "node-0") || done.Forecast != nil {
		t.Errorf("finished job: state %s, started %v, finished %v, JCT %v, placement %v, forecast %v",
			done.State, done.StartedAt, done.FinishedAt, done.JctS, done.Placement, done.Forecast)
	}

	running := waitFor(long.Id, genclient.StateRunning)
	if running.HeldGpus != 1 || running.AsOf == nil {
		t.Errorf("running job holds %v GPUs as of %v: want 1, with a time", running.HeldGpus, running.AsOf)
	}

	gpus, err := alice.ListGPUsWithResponse(ctx, &genclient.ListGPUsParams{})
	if err != nil || gpus.JSON200 == nil {
		t.Fatalf("GET /gpus: %v, status %d", err, gpus.StatusCode())
	}
	var where []string
	for _, g := range *gpus.JSON200 {
		where = append(where, fmt.Sprintf("%s:%d", g.Node, g.Index))
		for _, p := range g.Points {
			if p.MemMib != 40960 {
				t.Errorf("GPU %s:%d reads %d MiB of memory: want 40960 (--sim-gpus 1x2x40)", g.Node, g.Index, p.MemMib)
				break
			}
		}
	}
	slices.Sort(where)
	if want := []string{"node-0:0", "node-0:1"}; !slices.Equal(where, want) {
		t.Errorf("GET /gpus: %v, want %v", where, want)
	}

	queues, err := alice.ListQueuesWithResponse(ctx, &genclient.ListQueuesParams{})
	if err != nil || queues.JSON200 == nil {
		t.Fatalf("GET /queues: %v, status %d", err, queues.StatusCode())
	}
	q := queues.JSON200
	if q.Policy != "tiresias-l" || len(q.Queues) != len(q.Thresholds)+1 || q.AsOf.IsZero() {
		t.Errorf("GET /queues: policy %q, %d queues for %d thresholds, as of %v", q.Policy, len(q.Queues), len(q.Thresholds), q.AsOf)
	}
	var inQueue []string
	for _, qu := range q.Queues {
		for _, j := range qu.Jobs {
			inQueue = append(inQueue, fmt.Sprintf("%d:%s", j.Id, j.State))
		}
	}
	if want := []string{fmt.Sprintf("%d:running", long.Id)}; !slices.Equal(inQueue, want) {
		t.Errorf("queues hold %v: want %v", inQueue, want)
	}

	if r, err := bob.CancelJobWithResponse(ctx, long.Id); err != nil || r.JSON404 == nil {
		t.Errorf("bob cancels alice's job: %v, status %d: want 404 (another team's job does not exist to him)", err, r.StatusCode())
	}
	cancel, err := alice.CancelJobWithResponse(ctx, long.Id)
	if err != nil || cancel.JSON200 == nil || cancel.JSON200.Id != long.Id {
		t.Fatalf("DELETE /jobs/%d: %v, status %d, body %s", long.Id, err, cancel.StatusCode(), cancel.Body)
	}
	if j := waitFor(long.Id, genclient.StateCancelled); j.FinishedAt == nil || j.HeldGpus != 0 {
		t.Errorf("cancelled job: finished %v, holds %v GPUs", j.FinishedAt, j.HeldGpus)
	}
	if r, err := alice.CancelJobWithResponse(ctx, long.Id); err != nil || r.JSON409 == nil || r.JSON409.Error == "" {
		t.Errorf("cancel it again: %v, status %d: want 409 with an error", err, r.StatusCode())
	}
}
