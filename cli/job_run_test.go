package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
)

func TestJobRunFlags(t *testing.T) {
	dir := t.TempDir()
	params := filepath.Join(dir, "sweep.csv")
	if err := os.WriteFile(params, []byte("LR,BATCH\n0.1,32\n0.01,64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte("GPUPORTAL_X\n1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := api.Job{ID: 40, Name: "sweep[0]", Team: "vision", User: "alice", GPUs: 1, State: job.Queued, Array: &api.ArrayTask{ID: 40, Index: 0, Limit: 1}}
	limit := 7200.0
	shown := api.Job{ID: 41, Name: "b", Team: "vision", User: "alice", GPUs: 1, State: job.Running, Env: map[string]string{"LR": "0.1"},
		Workdir: "/data", TimeLimitS: &limit, TimeLeftS: &limit, Retries: 2,
		Dependencies: []job.Dependency{{Kind: job.AfterOK, JobID: 40}}, Array: &api.ArrayTask{ID: 40, Index: 1, Limit: 1}}
	array := api.Array{ID: 40, Name: "sweep", Team: "vision", User: "alice", Limit: 1, States: map[job.State]int{job.Queued: 1, job.Succeeded: 1},
		Tasks: []api.Job{first, shown}}
	tests := []struct {
		name    string
		args    []string
		wantErr string
		wantOut []string
		body    map[string]any // of the one request, when set
	}{
		{name: "every run setting", args: []string{"submit", "--name", "b", "--env", "LR=0.1", "--env", "EMPTY=", "--chdir", "/data",
			"--time", "2:00:00", "--retries", "2", "--dependency", "afterok:40", "--", "python3", "train.py"},
			wantOut: []string{"job 40 submitted"},
			body: map[string]any{"name": "b", "team": "", "gpus": 1, "command": []any{"python3", "train.py"},
				"env": map[string]any{"LR": "0.1", "EMPTY": ""}, "workdir": "/data", "time_limit": "2:00:00", "retries": 2,
				"dependencies": []any{map[string]any{"kind": "after_ok", "job_id": 40}}}},
		{name: "array with its parameters", args: []string{"submit", "--name", "sweep", "--array", "0-1%1", "--array-params", params, "--", "python3", "t.py"},
			wantOut: []string{"array 40 submitted: 2 tasks, 1 GPU each for team vision (jobs 40 to 41, at most 1 at once)"}},
		{name: "a reserved variable names --env", args: []string{"submit", "--name", "b", "--env", "GPUPORTAL_JOB_ID=1", "--", "x"}, wantErr: "GPUPORTAL_JOB_ID is set by gpuportal"},
		{name: "an invalid name", args: []string{"submit", "--name", "b", "--env", "A-B=1", "--", "x"}, wantErr: "-env"},
		{name: "a bad time names --time", args: []string{"submit", "--name", "b", "--time", "soon", "--", "x"}, wantErr: "--time"},
		{name: "a bad dependency names --dependency", args: []string{"submit", "--name", "b", "--dependency", "after:4", "--", "x"}, wantErr: "--dependency"},
		{name: "a bad array names --array", args: []string{"submit", "--name", "b", "--array", "3-1", "--", "x"}, wantErr: "--array"},
		{name: "a bad table names --array-params", args: []string{"submit", "--name", "b", "--array-params", bad, "--", "x"}, wantErr: "--array-params"},
		{name: "show prints what it runs with", args: []string{"show", "41"},
			wantOut: []string{"task 1 of array 40", "LR=0.1", "/data", "02:00:00 (02:00:00 left)", "up to 2", "afterok:40"}},
		{name: "resubmit", args: []string{"resubmit", "41"}, wantOut: []string{"job 41 submitted again as job 40", "alice's"}},
		{name: "array", args: []string{"array", "40"}, wantOut: []string{"array 40: sweep", "1 queued, 1 succeeded", "INDEX"}},
		{name: "cancel an array", args: []string{"array", "--cancel", "40"}, wantOut: []string{"array 40"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeAPI{routes: map[string]fakeAnswer{
				"POST /api/v1/jobs":             {http.StatusCreated, jsonOf(t, first)},
				"GET /api/v1/jobs/41":           {http.StatusOK, jsonOf(t, shown)},
				"GET /api/v1/jobs/41/history":   {http.StatusOK, "[]"},
				"POST /api/v1/jobs/41/resubmit": {http.StatusCreated, jsonOf(t, first)},
				"GET /api/v1/arrays/40":         {http.StatusOK, jsonOf(t, array)},
				"DELETE /api/v1/arrays/40":      {http.StatusOK, jsonOf(t, array)},
			}}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			out, _, err := jobRun(srv.URL, map[string]string{jobTokenEnv: "tok"}, t.TempDir(), tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
				if len(fake.requests()) != 0 {
					t.Error("a request reached the server")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if tc.body != nil {
				wantBody(t, fake.requests()[0], tc.body)
			}
			if tc.name == "array with its parameters" {
				var got map[string]any
				_ = json.Unmarshal([]byte(fake.requests()[0].body), &got)
				if got["array"] != "0-1%1" || !strings.Contains(got["array_params"].(string), "0.01,64") {
					t.Errorf("body %v", got)
				}
			}
		})
	}
}

// A 400 naming a run setting names its flag.
func TestJobRunFlagForField(t *testing.T) {
	fake := &fakeAPI{routes: map[string]fakeAnswer{
		"POST /api/v1/jobs": {http.StatusBadRequest, `{"error":"time_limit: team vision allows at most 02:00:00 per job"}`},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	_, _, err := jobRun(srv.URL, map[string]string{jobTokenEnv: "tok"}, t.TempDir(), "submit", "--name", "b", "--time", "3h", "--", "x")
	if err == nil || !strings.Contains(err.Error(), "Fix --time") {
		t.Errorf("err = %v; want it to name --time", err)
	}
}
