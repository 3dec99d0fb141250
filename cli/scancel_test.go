package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
)

// TestScancelArrays: scancel reads IDs as Slurm's scancel does: an
// array's ID cancels the whole array, ARRAY_INDEX one task, any other ID
// its job. scancel of an array's ID cancelled its first task alone.
func TestScancelArrays(t *testing.T) {
	task := func(id int64, index int, st job.State) api.Job {
		j := testJob(id, st)
		j.Array = &api.ArrayTask{ID: 20, Index: index}
		return j
	}
	array := api.Array{ID: 20, Name: "sweep", Team: "vision", User: "alice",
		States: map[job.State]int{job.Cancelled: 2}, Tasks: []api.Job{task(20, 0, job.Cancelled), task(21, 1, job.Cancelled)}}
	fake := &fakeAPI{routes: map[string]fakeAnswer{
		"GET /api/v1/jobs/20":      {200, jsonOf(t, task(20, 0, job.Running))},
		"GET /api/v1/jobs/21":      {200, jsonOf(t, task(21, 1, job.Queued))},
		"GET /api/v1/jobs/7":       {200, jsonOf(t, testJob(7, job.Running))},
		"GET /api/v1/arrays/20":    {200, jsonOf(t, array)},
		"DELETE /api/v1/arrays/20": {200, jsonOf(t, array)},
		"DELETE /api/v1/jobs/21":   {200, jsonOf(t, task(21, 1, job.Cancelled))},
		"DELETE /api/v1/jobs/7":    {200, jsonOf(t, testJob(7, job.Cancelled))},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	for _, tc := range []struct {
		args     []string
		want     string // the request that cancels
		wantOut  string
		wantErrs string
	}{
		{[]string{"20"}, "DELETE /api/v1/arrays/20", "array 20: sweep", ""},
		{[]string{"20_1"}, "DELETE /api/v1/jobs/21", "job 21 cancelled", ""},
		{[]string{"21"}, "DELETE /api/v1/jobs/21", "job 21 cancelled", ""},
		{[]string{"7"}, "DELETE /api/v1/jobs/7", "job 7 cancelled", ""},
		{[]string{"20_5"}, "", "", "20_5: array 20 has no task 5"},
		{[]string{"20_[1-3]"}, "", "", "want ARRAY_INDEX"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			fake.mu.Lock()
			fake.got = nil
			fake.mu.Unlock()
			out, _, err := cliRun(srv.URL, map[string]string{jobTokenEnv: "tok"}, t.TempDir(), append([]string{"scancel"}, tc.args...)...)
			if tc.wantErrs != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrs) {
					t.Errorf("err = %v, want %q", err, tc.wantErrs)
				}
				return
			}
			if err != nil || !strings.Contains(out, tc.wantOut) {
				t.Fatalf("err %v, out %q; want %q", err, out, tc.wantOut)
			}
			var cancels []string
			for _, r := range fake.requests() {
				if r.method == http.MethodDelete {
					cancels = append(cancels, r.method+" "+r.path)
				}
			}
			if len(cancels) != 1 || cancels[0] != tc.want {
				t.Errorf("cancels %v, want [%s]", cancels, tc.want)
			}
		})
	}
}
