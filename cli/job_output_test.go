package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/gpuportal/gpuportal/core/job"
)

// TestJobOutcomeExitCodes: logs --follow and submit --wait exit with a
// code that says how the job ended.
func TestJobOutcomeExitCodes(t *testing.T) {
	for _, tc := range []struct {
		state job.State
		code  int // 0: no error
	}{
		{job.Succeeded, 0},
		{job.Failed, exitJobFailed},
		{job.Cancelled, exitJobCancelled},
		{job.State("timed_out"), exitJobTimedOut},
	} {
		t.Run(string(tc.state), func(t *testing.T) {
			j := testJob(3, tc.state)
			exit := 1
			j.ExitCode = &exit
			finished := testNow
			j.FinishedAt = &finished
			mux := http.NewServeMux()
			mux.HandleFunc("GET /api/v1/jobs/3", func(w http.ResponseWriter, r *http.Request) { _ = json.NewEncoder(w).Encode(j) })
			mux.HandleFunc("POST /api/v1/jobs", func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
				_ = json.NewEncoder(w).Encode(testJob(3, job.Queued))
			})
			mux.HandleFunc("GET /api/v1/jobs/3/logs", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Log-Size", "4")
				if r.URL.Query().Get("offset") == "4" {
					return
				}
				_, _ = w.Write([]byte("out\n"))
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			env := map[string]string{jobTokenEnv: "tok"}
			for _, args := range [][]string{
				{"logs", "--follow", "--interval", "1ms", "3"},
				{"submit", "--wait", "--parsable", "--name", "x", "--sim-duration", "1m"},
			} {
				out, errOut, err := jobRun(srv.URL, env, t.TempDir(), args...)
				if got := exitCode(err, &strings.Builder{}); got != tc.code {
					t.Errorf("%v: exit code %d, want %d (err %v)", args, got, tc.code, err)
				}
				if !strings.Contains(errOut, "job 3 "+string(tc.state)+" (exit code 1)") {
					t.Errorf("%v: stderr %q does not say how the job ended", args, errOut)
				}
				if args[0] == "submit" && out != "3\n" {
					t.Errorf("submit --parsable --wait printed %q, want only the ID", out)
				}
			}
		})
	}
}

// TestSubmitWaitArray: submit --wait of an array waits for every task
// and exits as the array ended, as its first task that did not succeed;
// it waited for the first task alone and exited 0 when it succeeded.
func TestSubmitWaitArray(t *testing.T) {
	task := func(id int64, index int, st job.State, code int) api.Job {
		j := testJob(id, st)
		j.Array, j.ExitCode = &api.ArrayTask{ID: 3, Index: index}, &code
		return j
	}
	first := testJob(3, job.Queued)
	first.Array = &api.ArrayTask{ID: 3, Index: 0}
	array := api.Array{ID: 3, Name: "sweep", States: map[job.State]int{job.Succeeded: 2, job.Failed: 1},
		Tasks: []api.Job{task(3, 0, job.Succeeded, 0), task(4, 1, job.Failed, 4), task(5, 2, job.Succeeded, 0)}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(first)
	})
	mux.HandleFunc("GET /api/v1/jobs/3", func(w http.ResponseWriter, r *http.Request) { _ = json.NewEncoder(w).Encode(array.Tasks[0]) })
	mux.HandleFunc("GET /api/v1/arrays/3", func(w http.ResponseWriter, r *http.Request) { _ = json.NewEncoder(w).Encode(array) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	_, errOut, err := jobRun(srv.URL, map[string]string{jobTokenEnv: "tok"}, t.TempDir(),
		"submit", "--wait", "--name", "sweep", "--array", "0-2", "--sim-duration", "1m")
	if got := exitCode(err, &strings.Builder{}); got != exitJobFailed {
		t.Errorf("exit code %d, want %d (err %v)", got, exitJobFailed, err)
	}
	if want := "array 3 failed (2 succeeded, 1 failed): task 1, job 4, first (exit code 4)"; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q; want %q", errOut, want)
	}
}

// TestWaitArrayInterrupted: a wait on an array cut short says the array
// goes on and how to stop every task of it (scancel of its ID), not job
// cancel of its ID, which would stop its first task alone.
func TestWaitArrayInterrupted(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/arrays/3", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.Array{ID: 3, Tasks: []api.Job{testJob(3, job.Running)}})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cl, err := client.New(srv.URL, "tok")
	if err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	c := jobCmd{stderr: &errOut}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = c.waitArray(ctx, cl, 3, time.Millisecond)
	if es, ok := isExitStatus(err); !ok || es.code != exitInterrupted {
		t.Errorf("err %v, want exit status %d", err, exitInterrupted)
	}
	if want := "stopped waiting; array 3 goes on (gpuportal scancel 3 stops every task of it)"; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr %q; want %q", errOut.String(), want)
	}
}

// TestWriteYAML: -o yaml shows the JSON's fields in its order, with
// strings that look like other types quoted.
func TestWriteYAML(t *testing.T) {
	raw := `{"id":7,"name":"true","gpus":2,"held_gpus":0.5,"command":["python","1e3"],"started_at":null,"ok":false,"nested":{"z":1,"a":"x: y"}}`
	var b strings.Builder
	if err := writeYAML(&b, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	want := "id: 7\nname: \"true\"\ngpus: 2\nheld_gpus: 0.5\ncommand:\n  - python\n  - \"1e3\"\nstarted_at: null\nok: false\nnested:\n  z: 1\n  a: 'x: y'\n"
	if b.String() != want {
		t.Errorf("YAML:\n%s\nwant:\n%s", b.String(), want)
	}
	// It reads back as the same values.
	var fromYAML, fromJSON any
	if err := yaml.Unmarshal([]byte(b.String()), &fromYAML); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(raw), &fromJSON)
	if jsonOf(t, fromYAML) != jsonOf(t, fromJSON) {
		t.Errorf("YAML reads back as %s, want %s", jsonOf(t, fromYAML), jsonOf(t, fromJSON))
	}
}

// TestOutputFormats checks that every client command that prints what
// the server answered honours each -o through the one output layer
// (emit): json and yaml are the API's objects, name the jobs' names (or
// an error naming -o where there are none), wide and the default the
// tables and text for people.
func TestOutputFormats(t *testing.T) {
	running, cancelled := testJob(7, job.Running), testJob(7, job.Cancelled)
	resubmitted := testJob(21, job.Queued)
	array := api.Array{ID: 30, Name: "sweep", Team: "vision", User: "alice", States: map[job.State]int{job.Queued: 2},
		Tasks: []api.Job{testJob(30, job.Queued), testJob(31, job.Queued)}}
	array.Tasks[0].Array, array.Tasks[1].Array = &api.ArrayTask{ID: 30}, &api.ArrayTask{ID: 30, Index: 1}
	fake := &fakeAPI{routes: map[string]fakeAnswer{
		"POST /api/v1/jobs":                 {201, jsonOf(t, testJob(7, job.Queued))},
		"GET /api/v1/jobs":                  {200, jsonOf(t, []api.Job{running, testJob(8, job.Queued)})},
		"GET /api/v1/jobs/7":                {200, jsonOf(t, running)},
		"GET /api/v1/jobs/7/history":        {200, jsonOf(t, []api.Event{{At: testNow, State: job.Running, Detail: "started"}})},
		"DELETE /api/v1/jobs/7":             {200, jsonOf(t, cancelled)},
		"POST /api/v1/jobs/7/resubmit":      {201, jsonOf(t, resubmitted)},
		"POST /api/v1/jobs/7/keep-alive":    {200, jsonOf(t, running)},
		"GET /api/v1/arrays/30":             {200, jsonOf(t, array)},
		"GET /api/v1/accounting":            {200, jsonOf(t, api.Accounting{From: "2026-05-01", To: "2026-05-01", By: "team", Period: "range", Scope: "cluster", Rows: []api.AccountingRow{{Team: "vision", AllocatedGPUHours: 3}}})},
		"GET /api/v1/me/notifications":      {200, jsonOf(t, api.NotificationSettings{Email: "a@example.org"})},
		"GET /api/v1/jobs?state=queued":     {200, jsonOf(t, []api.Job{testJob(8, job.Queued)})},
		"GET /api/v1/jobs?state=preempted":  {200, `[]`},
		"GET /api/v1/jobs?state=waiting_no": {200, `[]`},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		c := jobCmd{
			getenv: func(k string) string {
				return map[string]string{jobServerEnv: srv.URL, jobTokenEnv: "tok"}[k]
			},
			configDir: func() (string, error) { return t.TempDir(), nil },
			now:       func() time.Time { return testNow }, http: srv.Client(), stdout: &out, stderr: &errOut,
		}
		ctx := context.Background()
		switch args[0] {
		case "accounting", "notify", "session":
		default:
			args = append([]string{"job"}, args...)
		}
		err := c.execute(ctx, args)
		return out.String(), err
	}
	tests := []struct {
		args []string
		// names are the -o name lines; nil: the command names nothing.
		names []string
		// human is in the default and the wide output.
		human string
	}{
		{[]string{"submit", "--name", "x", "--sim-duration", "1m"}, []string{"job/7"}, "job 7"},
		{[]string{"list"}, []string{"job/7", "job/8"}, "NAME"},
		{[]string{"list", "--start"}, []string{"job/8"}, "START"},
		{[]string{"get"}, []string{"job/7", "job/8"}, "NAME"},
		{[]string{"get", "7"}, []string{"job/7"}, "resnet"},
		{[]string{"show", "7"}, []string{"job/7"}, "history:"},
		{[]string{"describe", "7"}, []string{"job/7"}, "history:"},
		{[]string{"cancel", "7"}, []string{"job/7"}, "job 7 cancelled"},
		{[]string{"resubmit", "7"}, []string{"job/21"}, "as job 21"},
		{[]string{"array", "30"}, []string{"job/30", "job/31"}, "array 30"},
		{[]string{"session", "keep-alive", "--hours", "2", "7"}, []string{"job/7"}, "kept alive"},
		{[]string{"accounting"}, nil, "Accounting of the cluster"},
		{[]string{"notify", "show"}, nil, "a@example.org"},
	}
	for _, tc := range tests {
		for _, format := range []string{"", "wide", "json", "yaml", "name"} {
			name := strings.Join(tc.args, " ") + " -o " + format
			args := append(append([]string(nil), tc.args...), "-o", format)
			if format == "" {
				args = tc.args
			}
			out, err := run(args...)
			switch {
			case format == "name" && tc.names == nil:
				if err == nil || !strings.Contains(err.Error(), "-o name") {
					t.Errorf("%s: err %v, output %q; want an error naming -o name", name, err, out)
				}
				continue
			case err != nil:
				t.Errorf("%s: %v", name, err)
				continue
			}
			switch format {
			case "", "wide":
				if !strings.Contains(out, tc.human) {
					t.Errorf("%s: output %q lacks %q", name, out, tc.human)
				}
			case "json":
				if !json.Valid([]byte(out)) {
					t.Errorf("%s: output is not JSON:\n%s", name, out)
				}
			case "yaml":
				var v any
				err := yaml.Unmarshal([]byte(out), &v)
				_, isMap := v.(map[string]any)
				_, isList := v.([]any)
				if err != nil || json.Valid([]byte(out)) || !(isMap || isList) {
					t.Errorf("%s: output is not the object in YAML (%v):\n%s", name, err, out)
				}
			case "name":
				if got := strings.Fields(out); !slices.Equal(got, tc.names) {
					t.Errorf("%s: names %q, want %q", name, got, tc.names)
				}
			}
		}
	}
	if _, err := run("list", "-o", "table"); err == nil || !strings.Contains(err.Error(), "-o") {
		t.Errorf("-o table: err %v, want one naming -o", err)
	}
}
