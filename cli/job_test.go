package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
)

// fakeAPI answers the job API from fixed routes and records the requests.
type fakeAPI struct {
	mu     sync.Mutex
	routes map[string]fakeAnswer // "METHOD /path"
	got    []fakeRequest
}

type fakeAnswer struct {
	status int
	body   string
}

type fakeRequest struct {
	method, path string
	query        url.Values
	auth, body   string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.got = append(f.got, fakeRequest{r.Method, r.URL.Path, r.URL.Query(), r.Header.Get("Authorization"), string(body)})
	a, ok := f.routes[r.Method+" "+r.URL.Path+"?state="+r.URL.Query().Get("state")]
	if !ok {
		a, ok = f.routes[r.Method+" "+r.URL.Path]
	}
	f.mu.Unlock()
	if !ok {
		a = fakeAnswer{http.StatusNotFound, `{"error":"no such route"}`}
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func (f *fakeAPI) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.got...)
}

var testNow = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// hms is t's time of day where the test runs, as the commands print it.
func hms(t time.Time) string { return t.Local().Format("15:04:05") }

func testJob(id int64, state job.State) api.Job {
	started := testNow.Add(-90 * time.Second)
	return api.Job{
		ID: id, Name: "resnet", Team: "vision", User: "alice", GPUs: 2, State: state,
		Reason: "running on node-0", Command: []string{"python", "train.py", "--lr", "0.1 0.2"},
		SubmittedAt: testNow.Add(-5 * time.Minute), StartedAt: &started,
		Placement: []string{"node-0/0", "node-0/1"}, AttainedService: 180, ExecutedS: 90,
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// jobRun runs the job command against base with env as the environment
// and dir as the configuration folder.
func jobRun(base string, env map[string]string, dir string, args ...string) (stdout, stderr string, err error) {
	return cliRun(base, env, dir, append([]string{"job"}, args...)...)
}

// cliRun runs the command line args (sacct, scancel, sbatch, ...) as
// jobRun runs a job command.
func cliRun(base string, env map[string]string, dir string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	c := jobCmd{
		getenv: func(k string) string {
			if k == jobServerEnv && env[k] == "" {
				return base
			}
			return env[k]
		},
		configDir: func() (string, error) { return dir, nil },
		now:       func() time.Time { return testNow },
		http:      &http.Client{Timeout: 5 * time.Second},
		stdout:    &out, stderr: &errOut,
	}
	err = c.execute(context.Background(), args)
	return out.String(), errOut.String(), err
}

func TestJobCommands(t *testing.T) {
	running := testJob(7, job.Running)
	waiting := testJob(12, job.Queued)
	earliest, likely, latest, made := testNow.Add(20*time.Minute), testNow.Add(25*time.Minute), testNow.Add(40*time.Minute), testNow.Add(-2*time.Second)
	waiting.Forecast = &api.Forecast{State: api.ForecastExpected, Earliest: &earliest, Likely: &likely, Latest: &latest, MadeAt: &made}
	waiting.StartedAt, waiting.Placement = nil, nil
	capped := testJob(13, job.Queued)
	capped.StartedAt, capped.Placement = nil, nil
	capped.Forecast = &api.Forecast{State: api.ForecastNever, Reason: "cannot start while the cap of user alice in team vision is 2 GPUs: it needs 4", MadeAt: &made}
	preempted := testJob(14, job.Preempted)
	soon := testNow.Add(time.Minute)
	preempted.Forecast = &api.Forecast{State: api.ForecastExpected, Earliest: &soon, Likely: &soon, Latest: &soon, MadeAt: &made}
	cancelled := testJob(7, job.Cancelled)
	borrowed := testJob(15, job.Running)
	reclaimable := testNow.Add(100 * time.Second)
	borrowed.Borrowed, borrowed.ReclaimableAt = true, &reclaimable
	history := []api.Event{
		{At: testNow.Add(-5 * time.Minute), State: job.Queued, Detail: "submitted"},
		{At: testNow.Add(-90 * time.Second), State: job.Running, Detail: "started on node-0"},
	}
	routes := func(t *testing.T) map[string]fakeAnswer {
		return map[string]fakeAnswer{
			"POST /api/v1/jobs":                {201, jsonOf(t, testJob(7, job.Queued))},
			"GET /api/v1/jobs":                 {200, jsonOf(t, []api.Job{running})},
			"GET /api/v1/jobs?state=queued":    {200, jsonOf(t, []api.Job{capped, waiting})},
			"GET /api/v1/jobs?state=preempted": {200, jsonOf(t, []api.Job{preempted})},
			"GET /api/v1/jobs/7":               {200, jsonOf(t, running)},
			"GET /api/v1/jobs/7/history":       {200, jsonOf(t, history)},
			"DELETE /api/v1/jobs/7":            {200, jsonOf(t, cancelled)},
			"DELETE /api/v1/jobs/8":            {409, `{"error":"job 8 has already ended (succeeded)"}`},
			"GET /api/v1/jobs/7/logs":          {200, "epoch 1\nepoch 2\n"},
			"GET /api/v1/jobs/9":               {404, `{"error":"job 9 not found"}`},
			"GET /api/v1/jobs/10":              {502, "<html><body>Bad gateway</body></html>"},
			"GET /api/v1/jobs/11":              {401, `{"error":"invalid or expired token"}`},
			"GET /api/v1/jobs/12":              {200, jsonOf(t, waiting)},
			"GET /api/v1/jobs/12/history":      {200, jsonOf(t, history[:1])},
			"GET /api/v1/jobs/15":              {200, jsonOf(t, borrowed)},
			"GET /api/v1/jobs/15/history":      {200, jsonOf(t, history)},
		}
	}
	token := map[string]string{jobTokenEnv: "tok"}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantOut []string // in stdout
		wantErr []string // in the error
		// check looks at the requests the server saw.
		check func(t *testing.T, got []fakeRequest)
	}{
		{
			name: "submit a simulated job", args: []string{"submit", "--name", "resnet", "--gpus", "2", "--sim-duration", "90s"},
			wantOut: []string{"job 7 submitted: resnet, 2 GPUs for team vision (queued)"},
			check: func(t *testing.T, got []fakeRequest) {
				wantBody(t, got[0], map[string]any{"name": "resnet", "team": "", "gpus": 2.0, "sim": map[string]any{"duration_s": 90.0}})
				if got[0].auth != "Bearer tok" {
					t.Errorf("Authorization = %q", got[0].auth)
				}
			},
		},
		{
			name: "submit sends the command as argv, never a shell string",
			args: []string{"submit", "--name", "resnet", "--team", "vision", "--gpu-mem-gb", "12.5", "--model", "resnet50", "--", "python", "train.py", "--lr", "0.1 0.2", "$HOME"},
			check: func(t *testing.T, got []fakeRequest) {
				wantBody(t, got[0], map[string]any{"name": "resnet", "team": "vision", "gpus": 1.0, "gpu_mem_gb": 12.5, "model": "resnet50",
					"command": []any{"python", "train.py", "--lr", "0.1 0.2", "$HOME"}})
			},
		},
		{name: "submit seconds as a number", args: []string{"submit", "--name", "x", "--sim-duration", "30"},
			check: func(t *testing.T, got []fakeRequest) {
				wantBody(t, got[0], map[string]any{"name": "x", "team": "", "gpus": 1.0, "sim": map[string]any{"duration_s": 30.0}})
			}},
		{name: "submit --json prints the server's job", args: []string{"submit", "--json", "--name", "x", "--sim-duration", "1m"},
			wantOut: []string{`"id": 7`, `"state": "queued"`}},
		{name: "submit needs a workload", args: []string{"submit", "--name", "x"}, wantErr: []string{"job submit:", "after --", "--sim-duration"}},
		{name: "submit takes one workload", args: []string{"submit", "--name", "x", "--sim-duration", "1m", "--", "true"}, wantErr: []string{"not both"}},
		{name: "submit without -- names the fix", args: []string{"submit", "--name", "x", "python", "train.py"}, wantErr: []string{`"python"`, "after --"}},
		{name: "submit bad duration names the flag", args: []string{"submit", "--name", "x", "--sim-duration", "soon"}, wantErr: []string{"--sim-duration"}},
		{name: "list shows a table", args: []string{"list"},
			wantOut: []string{"ID  NAME    USER   TEAM    GPUS  STATE    QUEUE  SUBMITTED  REASON", "7   resnet  alice  vision  2     running  0      5m ago     running on node-0"}},
		{name: "list passes its filters", args: []string{"list", "--scope", "mine", "--state", "running", "--limit", "5"},
			check: func(t *testing.T, got []fakeRequest) {
				if q := got[0].query; q.Get("scope") != "mine" || q.Get("state") != "running" || q.Get("limit") != "5" {
					t.Errorf("query = %v", q)
				}
			}},
		{name: "list --json", args: []string{"list", "--json"}, wantOut: []string{"[\n  {\n    \"id\": 7"}},
		{name: "list -o name", args: []string{"list", "-o", "name"}, wantOut: []string{"job/7\n"}},
		{name: "list -o wide adds columns and whole values", args: []string{"list", "-o", "wide"},
			wantOut: []string{"STARTED", "FINISHED", "EXIT_CODE", "PLACEMENT", "node-0/0,node-0/1", "1m ago"}},
		{name: "list --parsable: every column, times in RFC 3339", args: []string{"list", "--parsable"},
			wantOut: []string{"ID|NAME|USER|TEAM|GPUS|STATE|QUEUE|SUBMITTED|STARTED|FINISHED|EXIT_CODE|PLACEMENT|REASON\n" +
				"7|resnet|alice|vision|2|running|0|2026-05-01T11:55:00Z|2026-05-01T11:58:30Z|||node-0/0,node-0/1|running on node-0\n"}},
		{name: "list --parsable --no-headers", args: []string{"list", "--parsable", "--no-headers"}, wantOut: []string{"7|resnet|"}},
		{name: "list -o yaml", args: []string{"list", "-o", "yaml"}, wantOut: []string{"- id: 7\n  name: resnet\n", "started_at: \"2026-05-01T11:58:30Z\"", "finished_at: null"}},
		{name: "list --parsable with -o", args: []string{"list", "--parsable", "-o", "json"}, wantErr: []string{"--parsable and -o"}},
		{name: "list with an unknown -o", args: []string{"list", "-o", "xml"}, wantErr: []string{`job list: -o "xml": want json, yaml, wide or name`}},
		{name: "list --start --parsable", args: []string{"list", "--start", "--parsable"}, wantOut: []string{"ID|NAME|USER|TEAM|GPUS|STATE|START|EARLIEST|LIKELY|LATEST|FORECAST\n14|"}},
		{name: "show -o json is the API's job", args: []string{"show", "7", "-o", "json"}, wantOut: []string{"{\n  \"id\": 7,"}},
		{name: "show -o yaml", args: []string{"show", "7", "--output", "yaml"}, wantOut: []string{"id: 7\nname: resnet\n"}},
		{name: "submit --parsable", args: []string{"submit", "--parsable", "--name", "x", "--sim-duration", "1m"}, wantOut: []string{"7\n"}},
		{name: "submit -o name", args: []string{"submit", "-o", "name", "--name", "x", "--sim-duration", "1m"}, wantOut: []string{"job/7\n"}},
		{name: "cancel -o name", args: []string{"cancel", "-o", "name", "7"}, wantOut: []string{"job/7\n"}},
		{name: "show the job and its history", args: []string{"show", "7"},
			wantOut: []string{"job 7: resnet", "state:", "running", "command:", "python train.py --lr '0.1 0.2'", "node-0/0, node-0/1",
				"history:", "started on node-0", "submitted"}},
		{name: "show a borrowed job with when it may be reclaimed", args: []string{"show", "15"},
			wantOut: []string{"running (borrowed: beyond its team's guarantee, it may be reclaimed)", "reclaimable:",
				"from " + reclaimable.Local().Format(time.DateTime) + " (in 1m40s)\n"}},
		{name: "show a waiting job with its expected start", args: []string{"show", "12"},
			wantOut: []string{"state:", "queued", "queue:", "expected start:", "between " + hms(earliest) + " and " + hms(latest) + " (in 20m00s to 40m00s), likely " + hms(likely), "forecast made:"}},
		{name: "list --start: waiting jobs, soonest first, the capped one last with its reason", args: []string{"list", "--start"},
			wantOut: []string{"START", "LIKELY", "FORECAST", "14 ", hms(soon), "12 ", hms(earliest) + "–" + hms(latest), hms(likely), "13 ", "never", "cap of user alice"},
			check: func(t *testing.T, got []fakeRequest) {
				if len(got) != 2 || got[0].query.Get("state") != "queued" || got[1].query.Get("state") != "preempted" {
					t.Errorf("requests %+v: want queued then preempted jobs", got)
				}
			}},
		{name: "list --start with a final state", args: []string{"list", "--start", "--state", "succeeded"}, wantErr: []string{"--start lists waiting jobs"}},
		{name: "show with flags after the ID", args: []string{"show", "7", "--json"}, wantOut: []string{`"job": {`, `"history": [`}},
		{name: "show an unknown job gives the server's message", args: []string{"show", "9"}, wantErr: []string{"job show: job 9 not found (HTTP 404)"}},
		{name: "a proxy's error page", args: []string{"show", "10"}, wantErr: []string{"502 Bad Gateway", "Bad gateway"}},
		{name: "a refused token says how to get one", args: []string{"show", "11"},
			wantErr: []string{"invalid or expired token (HTTP 401)", "-X POST", "/api/v1/tokens", "/tokens"}},
		{name: "show a bad ID", args: []string{"show", "seven"}, wantErr: []string{`job ID "seven"`}},
		{name: "cancel", args: []string{"cancel", "7"}, wantOut: []string{"job 7 cancelled"},
			check: func(t *testing.T, got []fakeRequest) {
				if got[0].method != http.MethodDelete || got[0].path != "/api/v1/jobs/7" {
					t.Errorf("request = %s %s", got[0].method, got[0].path)
				}
			}},
		{name: "cancel several, one refused", args: []string{"cancel", "7", "8"}, wantOut: []string{"job 7 cancelled"},
			wantErr: []string{"job 8: job 8 has already ended (succeeded) (HTTP 409)"}},
		{name: "logs", args: []string{"logs", "--tail-bytes", "100", "7"}, wantOut: []string{"epoch 1\nepoch 2\n"},
			check: func(t *testing.T, got []fakeRequest) {
				if got[0].query.Get("tail_bytes") != "100" {
					t.Errorf("query = %v", got[0].query)
				}
			}},
		{name: "output is logs, as docs/slurm.md names it", args: []string{"output", "--tail-bytes", "100", "7"}, wantOut: []string{"epoch 1\nepoch 2\n"}},
		{name: "logs bad tail", args: []string{"logs", "--tail-bytes", "0", "7"}, wantErr: []string{"--tail-bytes"}},
		{name: "no token says how to get one", args: []string{"list"}, env: map[string]string{},
			wantErr: []string{"no API token", jobTokenEnv, "chmod 600", "-X POST", "/api/v1/tokens"}},
		{name: "bad server URL", args: []string{"list"}, env: map[string]string{jobTokenEnv: "tok", jobServerEnv: "gpus.example.com"},
			wantErr: []string{`--server "gpus.example.com"`}},
		{name: "unknown command", args: []string{"frobnicate"}, wantErr: []string{`unknown command "frobnicate"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeAPI{routes: routes(t)}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			env := tc.env
			if env == nil {
				env = token
			}
			out, _, err := jobRun(srv.URL, env, t.TempDir(), tc.args...)
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("err = %v", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v; want it to contain %q", err, w)
				}
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if tc.check != nil {
				got := fake.requests()
				if len(got) == 0 {
					t.Fatal("no request reached the server")
				}
				tc.check(t, got)
			}
		})
	}
}

func wantBody(t *testing.T, r fakeRequest, want map[string]any) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	if jsonOf(t, got) != jsonOf(t, want) {
		t.Errorf("body = %s\nwant   %s", jsonOf(t, got), jsonOf(t, want))
	}
}

func TestJobTokenFile(t *testing.T) {
	fake := &fakeAPI{routes: map[string]fakeAnswer{"GET /api/v1/jobs": {200, "[]"}}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	tests := []struct {
		name     string
		content  string
		mode     os.FileMode
		env      string
		wantErr  string
		wantAuth string
	}{
		{name: "owner-only file", content: "filetok\n", mode: 0o600, wantAuth: "Bearer filetok"},
		{name: "the environment wins", content: "filetok\n", mode: 0o600, env: "envtok", wantAuth: "Bearer envtok"},
		{name: "file others may read is refused", content: "filetok\n", mode: 0o644, wantErr: "chmod 600"},
		{name: "group-readable file is refused", content: "filetok\n", mode: 0o640, wantErr: "mode 0640"},
		{name: "empty file", content: "\n", mode: 0o600, wantErr: "is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "gpuportal", "token")
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tc.content), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil { // past the umask
				t.Fatal(err)
			}
			before := len(fake.requests())
			_, _, err := jobRun(srv.URL, map[string]string{jobTokenEnv: tc.env}, dir, "list")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
				if len(fake.requests()) != before {
					t.Error("the token was sent although the file was refused")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := fake.requests()
			if len(got) != before+1 || got[len(got)-1].auth != tc.wantAuth {
				t.Errorf("requests %v; want one with %q", got[before:], tc.wantAuth)
			}
		})
	}
}

func TestParseJobServer(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", true},
		{"https://gpus.example.com/", "https://gpus.example.com", true},
		{"https://example.com/portal/", "https://example.com/portal", true},
		{"gpus.example.com", "", false},
		{"ftp://gpus.example.com", "", false},
		{"https://", "", false},
		{"https://gpus.example.com/?x=1", "", false},
	}
	for _, tc := range tests {
		u, err := parseJobServer(tc.in)
		if (err == nil) != tc.ok || (tc.ok && u.String() != tc.want) {
			t.Errorf("parseJobServer(%q) = %v, %v; want %q (ok %v)", tc.in, u, err, tc.want, tc.ok)
		}
	}
}

// TestFollowLogs follows a job whose output grows over several polls and
// then ends: every byte is shown once, in order, then how the job ended.
func TestFollowLogs(t *testing.T) {
	chunks := []string{"", "loading\n", "loading\nepoch 1\n", "loading\nepoch 1\nepoch 2\n", "loading\nepoch 1\nepoch 2\ndone\n"}
	var mu sync.Mutex
	poll := 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/jobs/3", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		poll++
		j := testJob(3, job.Running)
		if poll >= len(chunks) {
			j.State = job.Succeeded
			code := 0
			j.ExitCode = &code
		}
		_ = json.NewEncoder(w).Encode(j)
	})
	mux.HandleFunc("GET /api/v1/jobs/3/logs", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		out := chunks[min(poll, len(chunks))-1]
		if out == "" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":"job 3 has no output on a connected machine"}`)
			return
		}
		// As the server answers: the size, then from ?offset= on, or
		// the last ?tail_bytes=.
		w.Header().Set("X-Log-Size", strconv.Itoa(len(out)))
		if off, err := strconv.Atoi(r.URL.Query().Get("offset")); err == nil {
			_, _ = io.WriteString(w, out[min(off, len(out)):])
			return
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("tail_bytes"))
		_, _ = io.WriteString(w, out[max(0, len(out)-n):])
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	out, errOut, err := jobRun(srv.URL, map[string]string{jobTokenEnv: "tok"}, t.TempDir(), "logs", "--follow", "--interval", "1ms", "3")
	if err != nil {
		t.Fatal(err)
	}
	if want := chunks[len(chunks)-1]; out != want {
		t.Errorf("followed output = %q, want %q", out, want)
	}
	if !strings.Contains(errOut, "job 3 succeeded (exit code 0)") {
		t.Errorf("stderr = %q, want how the job ended", errOut)
	}
}

// TestJobListAll checks that list --all follows the server's cursor to
// the last page, passing the filters on every request, and that bad
// filters name the flag.
func TestJobListAll(t *testing.T) {
	var mu sync.Mutex
	var queries []url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.Query())
		mu.Unlock()
		pages := map[string]struct {
			ids  []int64
			next string
		}{"": {[]int64{9, 8}, "c1"}, "c1": {[]int64{7, 6}, "c2"}, "c2": {[]int64{5}, ""}}
		p := pages[r.URL.Query().Get("cursor")]
		var js []api.Job
		for _, id := range p.ids {
			js = append(js, testJob(id, job.Succeeded))
		}
		if p.next != "" {
			w.Header().Set("X-Next-Cursor", p.next)
		}
		_ = json.NewEncoder(w).Encode(js)
	}))
	defer srv.Close()
	env := map[string]string{jobTokenEnv: "tok"}
	out, _, err := jobRun(srv.URL, env, t.TempDir(), "list", "--all", "--limit", "2", "--user", "alice", "--team", "vision", "--state", "succeeded,failed", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got []api.Job
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if ids := idsOf(got); len(ids) != 5 || ids[0] != 9 || ids[4] != 5 {
		t.Errorf("got jobs %v, want 9 to 5", idsOf(got))
	}
	if len(queries) != 3 {
		t.Fatalf("%d requests, want 3", len(queries))
	}
	for _, q := range queries {
		if q.Get("user") != "alice" || q.Get("team") != "vision" || q.Get("state") != "succeeded,failed" || q.Get("limit") != "2" {
			t.Errorf("query %v lost a filter", q)
		}
	}
	out, _, err = jobRun(srv.URL, env, t.TempDir(), "list", "--limit", "2")
	if err != nil || strings.Count(out, "resnet") != 2 {
		t.Errorf("without --all: err %v, output %q: want the first page only", err, out)
	}
	for _, tc := range []struct{ args, flag string }{
		{"--state sleeping", "--state"},
		{"--limit 5000", "--limit"},
		{"--limit -1", "--limit"},
	} {
		_, _, err := jobRun(srv.URL, env, t.TempDir(), append([]string{"list"}, strings.Fields(tc.args)...)...)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("list %s: err %v, want it to name %s", tc.args, err, tc.flag)
		}
	}
}

func idsOf(js []api.Job) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// TestJobGetWatch checks that get ID --watch prints the job, then a row
// each time it changes (not when only its figures do), and ends when it
// has ended; and that its flags are checked, the error naming the flag.
func TestJobGetWatch(t *testing.T) {
	states := []job.State{job.Queued, job.Queued, job.Running, job.Running, job.Succeeded}
	var mu sync.Mutex
	poll := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		j := testJob(7, states[min(poll, len(states)-1)])
		j.ExecutedS = float64(poll) // figures change with every reading
		poll++
		_ = json.NewEncoder(w).Encode(j)
	}))
	defer srv.Close()
	env := map[string]string{jobTokenEnv: "tok"}
	out, _, err := jobRun(srv.URL, env, t.TempDir(), "get", "7", "--watch", "--interval", "1ms")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for line := range strings.Lines(out) {
		got = append(got, strings.Fields(line)[5]) // STATE
	}
	if want := []string{"STATE", "queued", "running", "succeeded"}; !slices.Equal(got, want) {
		t.Errorf("watched states %q, want %q:\n%s", got, want, out)
	}
	out, _, err = jobRun(srv.URL, env, t.TempDir(), "get", "7", "-w", "--interval", "1ms", "-o", "name")
	if err != nil || out != "job/7\n" {
		t.Errorf("get 7 -w -o name of an ended job: %q, %v; want job/7 once", out, err)
	}
	for _, tc := range []struct{ args, flag string }{
		{"get 7 --interval 1s", "--interval"},
		{"get 7 --watch --interval 0s", "--interval"},
		{"list --watch --format %i", "--format"},
		{"list --watch --start", "--start"},
		{"get 7 --state running", "--state"},
		{"get seven", "seven"},
		{"list 7", "job get"},
	} {
		_, _, err := jobRun(srv.URL, env, t.TempDir(), strings.Fields(tc.args)...)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%s: err %v, want it to name %s", tc.args, err, tc.flag)
		}
	}
}

// TestJobListWatch checks that list --watch prints the changed jobs
// until it is stopped, and then ends without an error.
func TestJobListWatch(t *testing.T) {
	var mu sync.Mutex
	poll := 0
	changed := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		poll++
		js := []api.Job{testJob(7, job.Running), testJob(8, job.Queued)}
		if poll > 2 {
			js[1].State = job.Running
		}
		if poll == 4 {
			close(changed)
		}
		_ = json.NewEncoder(w).Encode(js)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-changed; cancel() }()
	var out, errOut bytes.Buffer
	c := jobCmd{
		getenv: func(k string) string {
			return map[string]string{jobServerEnv: srv.URL, jobTokenEnv: "tok"}[k]
		},
		configDir: func() (string, error) { return t.TempDir(), nil },
		now:       func() time.Time { return testNow }, http: srv.Client(), stdout: &out, stderr: &errOut,
	}
	if err := c.execute(ctx, []string{"job", "list", "--watch", "--interval", "1ms", "-o", "name"}); err != nil {
		t.Fatalf("list --watch stopped: %v", err)
	}
	if got, want := out.String(), "job/7\njob/8\njob/8\n"; got != want {
		t.Errorf("list --watch -o name printed %q, want %q", got, want)
	}
}
