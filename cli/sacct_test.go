package cli

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
)

func TestSacctFormat(t *testing.T) {
	at := time.Date(2026, 11, 28, 9, 0, 0, 0, time.Local)
	end := at.Add(90 * time.Minute)
	zero, killed := 0, -1
	jobs := []api.Job{
		{ID: 7, Name: "train-resnet50-long", Team: "vision", GPUs: 8, State: job.Succeeded, ExitCode: &zero, ExecutedS: 5400,
			SubmittedAt: at, StartedAt: &at, FinishedAt: &end, Placement: []string{"a:0", "b:0"},
			Resources: &api.JobResources{Allocations: []api.Allocation{{Node: "a", CPUMilli: 1500}, {Node: "b", CPUMilli: 2000}}}},
		{ID: 9, Name: "sweep[1]", Team: "nlp", GPUs: 1, State: job.Failed, ExitCode: &killed, Array: &api.ArrayTask{ID: 8, Index: 1}, SubmittedAt: at,
			AllocCPUs: 6}, // ended: its last run's CPUs
		{ID: 10, Name: "segv", Team: "nlp", GPUs: 1, State: job.Failed, ExitCode: &killed, SubmittedAt: at,
			Reason: "run 1: " + job.KilledBy(syscall.SIGSEGV) + " on node-1"},
		{ID: 11, Name: "term", Team: "nlp", GPUs: 1, State: job.Failed, ExitCode: &killed, SubmittedAt: at,
			Reason: job.KilledBy(syscall.SIGTERM)},
	}
	for _, tc := range []struct {
		format             string
		parsable, noHeader bool
		want               string
	}{
		{sacctDefault, false, false, "" +
			"       JobID    JobName  Partition    Account  AllocCPUS      State ExitCode\n" +
			"------------ ---------- ---------- ---------- ---------- ---------- --------\n" +
			"           7 train-res+     vision     vision          4  COMPLETED      0:0\n" +
			"         8_1   sweep[1]        nlp        nlp          6     FAILED      0:9\n" +
			"          10       segv        nlp        nlp          0     FAILED     0:11\n" +
			"          11       term        nlp        nlp          0     FAILED     0:15\n"},
		{"jobid,elapsed,nnodes,nodelist,alloctres,start", true, false, "" +
			"JobID|Elapsed|NNodes|NodeList|AllocTRES|Start\n" +
			"7|01:30:00|2|a,b|gres/gpu=8|2026-11-28T09:00:00\n" +
			"8_1|00:00:00|0|None assigned|gres/gpu=1|Unknown\n" +
			"10|00:00:00|0|None assigned|gres/gpu=1|Unknown\n" +
			"11|00:00:00|0|None assigned|gres/gpu=1|Unknown\n"},
		{"JobName%-6,State%4", false, true, "train+ COM+\nsweep+ FAI+\nsegv   FAI+\nterm   FAI+\n"},
	} {
		cols, err := parseSacctFormat(tc.format)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		writeSacct(&b, cols, jobs, tc.parsable, tc.noHeader)
		if b.String() != tc.want {
			t.Errorf("format %q:\n%s\nwant:\n%s", tc.format, b.String(), tc.want)
		}
	}
	for _, bad := range []string{"JobID,Bogus", "State%x", "State%0"} {
		if _, err := parseSacctFormat(bad); err == nil || !strings.Contains(err.Error(), "--format") {
			t.Errorf("format %q: %v", bad, err)
		}
	}
	if _, err := parseSlurmTime("2026-11-28T10:30", time.UTC); err != nil {
		t.Error(err)
	}
	if _, err := parseSlurmTime("yesterday", time.UTC); err == nil {
		t.Error("parseSlurmTime(yesterday): no error")
	}
}

// TestSacctArrayTask: -j ARRAY_INDEX (as sacct writes a task's JobID)
// names that task; -j ARRAY the array's tasks. "13_1" was refused as not
// a job ID.
func TestSacctArrayTask(t *testing.T) {
	task := func(id int64, index int) api.Job {
		j := testJob(id, job.Succeeded)
		j.Array, j.SubmittedAt = &api.ArrayTask{ID: 13, Index: index}, time.Now()
		return j
	}
	fake := &fakeAPI{routes: map[string]fakeAnswer{
		"GET /api/v1/jobs": {200, jsonOf(t, []api.Job{task(15, 2), task(14, 1), task(13, 0)})},
	}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	for _, tc := range []struct{ ids, want string }{
		{"13_1", "13_1\n"},
		{"13_1,13_2", "13_1\n13_2\n"},
		{"13", "13_0\n13_1\n13_2\n"},
	} {
		var out, errOut bytes.Buffer
		c := jobCmd{getenv: func(k string) string {
			switch k {
			case jobServerEnv:
				return srv.URL
			case jobTokenEnv:
				return "tok"
			}
			return ""
		}, configDir: func() (string, error) { return t.TempDir(), nil }, now: time.Now, http: srv.Client(), stdout: &out, stderr: &errOut}
		if err := c.execute(context.Background(), []string{"sacct", "-j", tc.ids, "-n", "-P", "-o", "JobID"}); err != nil || out.String() != tc.want {
			t.Errorf("sacct -j %s: %v, %q; want %q", tc.ids, err, out.String(), tc.want)
		}
	}
}
