package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

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
