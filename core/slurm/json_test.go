package slurm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The fixtures in testdata were captured from Slurm 22.05.8 on Debian 12:
// a two-node cluster (n1, n2) with four fake GPUs each.

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jobsByName(t *testing.T, fixture string) map[string]Job {
	t.Helper()
	jobs, err := ParseJobs(readFixture(t, fixture))
	if err != nil {
		t.Fatalf("%s: %v", fixture, err)
	}
	out := make(map[string]Job)
	for _, j := range jobs {
		out[j.Name] = j
	}
	return out
}

func TestParseJobsReadsEveryState(t *testing.T) {
	jobs := jobsByName(t, "squeue-mixed.json")
	tests := []struct {
		name     string
		state    string
		reason   string
		finished bool
		started  bool
		held     bool
		code     int
		signal   syscall.Signal
		gpus     []int
	}{
		{"gpuportal-101", "PENDING", "JobHeldUser", false, false, true, 0, 0, nil},
		{"gpuportal-102", "RUNNING", "None", false, true, false, 0, 0, []int{0, 1}},
		{"gpuportal-104", "FAILED", "NonZeroExitCode", true, true, false, 3, 0, nil},
		// Stopped with scancel --full --signal=TERM: Slurm says FAILED.
		{"gpuportal-105", "FAILED", "JobLaunchFailure", true, true, false, -1, syscall.SIGTERM, nil},
		// Caught the SIGTERM and exited 0.
		{"gpuportal-106", "COMPLETED", "None", true, true, false, 0, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, ok := jobs[tt.name]
			if !ok {
				t.Fatalf("no job %s", tt.name)
			}
			if j.State != tt.state || j.Reason != tt.reason {
				t.Errorf("state %s (%s), want %s (%s)", j.State, j.Reason, tt.state, tt.reason)
			}
			if j.Finished() != tt.finished || j.Started() != tt.started || j.Held() != tt.held {
				t.Errorf("finished %v started %v held %v, want %v %v %v", j.Finished(), j.Started(), j.Held(), tt.finished, tt.started, tt.held)
			}
			if code, sig := j.ExitCode(); code != tt.code || sig != tt.signal {
				t.Errorf("exit %d signal %v, want %d %v", code, sig, tt.code, tt.signal)
			}
			if !slices.Equal(j.GPUs, tt.gpus) {
				t.Errorf("GPUs %v, want %v", j.GPUs, tt.gpus)
			}
			if j.ID <= 0 || j.User != "root" || j.Partition != "gpu" || j.SubmitTime.IsZero() || j.MemMiB != 100 || j.CPUs != 1 {
				t.Errorf("job = %+v", j)
			}
			if tt.started != !j.StartTime.IsZero() || tt.finished != !j.EndTime.IsZero() {
				t.Errorf("start %v end %v", j.StartTime, j.EndTime)
			}
		})
	}
	if j := jobs["gpuportal-102"]; j.Nodes != "n1" || j.RequiredNodes != "n1" {
		t.Errorf("running job on %q pinned to %q, want n1", j.Nodes, j.RequiredNodes)
	}
}

func TestParseJobsEndStates(t *testing.T) {
	jobs := jobsByName(t, "squeue-nodefail.json")
	if j := jobs["gpuportal-107"]; j.State != "NODE_FAIL" || j.Reason != "NodeDown" || !j.Finished() {
		t.Errorf("job on the killed slurmd's node = %+v; want NODE_FAIL", j)
	}
	jobs = jobsByName(t, "squeue-ended.json")
	if j := jobs["gpuportal-1"]; j.State != "FAILED" || j.WaitStatus != 768 || j.Comment != "gpuportal job 1 gpus=0" {
		t.Errorf("gpuportal-1 = %+v; want FAILED with wait status 768 and its comment", j)
	}
	if j := jobs["gpuportal-2"]; j.State != "COMPLETED" || j.CPUs != 4 || j.MemMiB != 1024 {
		t.Errorf("gpuportal-2 = %+v", j)
	}
	// Cancelled while held: null CPUs, no node.
	if j := jobs["gpuportal-200"]; j.State != "CANCELLED" || j.Nodes != "" || j.RequiredNodes != "n2" || j.CPUs != 0 {
		t.Errorf("gpuportal-200 = %+v", j)
	}
	if j := jobs["job.sh"]; j.State != "CANCELLED" || j.WaitStatus != 15 {
		t.Errorf("job.sh = %+v; want CANCELLED by SIGTERM", j)
	}
}

func TestParseJobsTypedGres(t *testing.T) {
	jobs := jobsByName(t, "squeue-typed.json")
	if j := jobs["gpuportal-300"]; !slices.Equal(j.GPUs, []int{0, 2}) {
		t.Errorf("a100+v100 job GPUs %v, want [0 2]", j.GPUs)
	}
	if j := jobs["gpuportal-301"]; !slices.Equal(j.GPUs, []int{1}) {
		t.Errorf("second job GPUs %v, want [1]", j.GPUs)
	}
}

func TestParseNodes(t *testing.T) {
	tests := []struct {
		fixture  string
		node     string
		state    string
		lost     bool
		draining bool
		reason   string
		types    []string
		parts    []string
	}{
		{"sinfo-idle.json", "n1", "IDLE", false, false, "", []string{"", "", "", ""}, []string{"gpu"}},
		{"sinfo-drain.json", "n1", "MIXED", false, false, "", []string{"", "", "", ""}, []string{"gpu"}},
		{"sinfo-drain.json", "n2", "IDLE", false, true, "maintenance by bob", []string{"", "", "", ""}, []string{"gpu"}},
		{"sinfo-down.json", "n2", "DOWN", true, false, "Not responding", []string{"", "", "", ""}, []string{"gpu"}},
		{"sinfo-typed.json", "n1", "MIXED", false, false, "", []string{"a100", "a100", "v100", "v100"}, []string{"gpu"}},
		{"sinfo-typed.json", "n2", "IDLE", false, true, "x", []string{"a100", "a100", "v100", "v100"}, []string{"gpu", "other"}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture+"/"+tt.node, func(t *testing.T) {
			nodes, err := ParseNodes(readFixture(t, tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(nodes, func(n Node) bool { return n.Name == tt.node })
			if i < 0 {
				t.Fatalf("no node %s", tt.node)
			}
			n := nodes[i]
			if n.State != tt.state || n.Lost() != tt.lost || n.Draining() != tt.draining || n.Reason != tt.reason {
				t.Errorf("node %+v: lost %v draining %v; want %s lost %v draining %v reason %q",
					n, n.Lost(), n.Draining(), tt.state, tt.lost, tt.draining, tt.reason)
			}
			if n.CPUs != 8 && n.CPUs != 2 || n.MemMiB != 2048 {
				t.Errorf("resources %d CPUs %d MiB", n.CPUs, n.MemMiB)
			}
			var types []string
			for k, g := range n.GPUs {
				if g.Index != k {
					t.Errorf("GPU %d has index %d", k, g.Index)
				}
				types = append(types, g.Type)
			}
			if !slices.Equal(types, tt.types) || !slices.Equal(n.Partitions, tt.parts) {
				t.Errorf("GPU types %q partitions %q, want %q %q", types, n.Partitions, tt.types, tt.parts)
			}
			if !n.InPartition("") || !n.InPartition("gpu") || n.InPartition("nope") {
				t.Errorf("partitions wrong: %v", n.Partitions)
			}
		})
	}
}

func TestNodeStates(t *testing.T) {
	tests := []struct {
		name     string
		state    string
		flags    []string
		lost     bool
		draining bool
	}{
		{"idle", "IDLE", nil, false, false},
		{"allocated", "ALLOCATED", nil, false, false},
		{"drain", "IDLE", []string{"DRAIN"}, false, true},
		{"draining with jobs", "MIXED", []string{"DRAIN"}, false, true},
		{"maintenance", "IDLE", []string{"MAINTENANCE"}, false, true},
		{"down", "DOWN", nil, true, false},
		{"down and drained", "DOWN", []string{"DRAIN"}, true, true},
		{"not responding, not yet down", "ALLOCATED", []string{"NOT_RESPONDING"}, false, false},
		{"down, not responding", "DOWN", []string{"NOT_RESPONDING"}, true, false},
		{"powered down", "IDLE", []string{"POWERED_DOWN"}, true, false},
		{"unknown", "UNKNOWN", nil, true, false},
		{"future", "FUTURE", nil, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := Node{State: tt.state, Flags: tt.flags}
			if n.Lost() != tt.lost || n.Draining() != tt.draining {
				t.Errorf("lost %v draining %v, want %v %v", n.Lost(), n.Draining(), tt.lost, tt.draining)
			}
		})
	}
}

func TestParseGres(t *testing.T) {
	tests := []struct {
		in    string
		types []string
		err   bool
	}{
		{"", nil, false},
		{"(null)", nil, false},
		{"gpu:4", []string{"", "", "", ""}, false},
		{"gpu", []string{""}, false},
		{"gpu:a100:2", []string{"a100", "a100"}, false},
		{"gpu:a100:2(S:0-1)", []string{"a100", "a100"}, false},
		{"gpu:a100:1(S:0,1),gpu:v100:1(S:1)", []string{"a100", "v100"}, false},
		{"gpu:a100:2,gpu:v100:2", []string{"a100", "a100", "v100", "v100"}, false},
		{"gpu:2,shard:8", []string{"", ""}, false},
		{"mps:100,gpu:1", []string{""}, false},
		{"gpu:0", nil, false},
		{"gpu:x", nil, true},
		{"gpu:-1", nil, true},
		{"gpu:a:b:c", nil, true},
		{"gpu:99999", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			gpus, err := ParseGres(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			var types []string
			for _, g := range gpus {
				types = append(types, g.Type)
			}
			if !slices.Equal(types, tt.types) {
				t.Errorf("types %q, want %q", types, tt.types)
			}
		})
	}
}

func TestParseGresIndices(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"gpu:2(IDX:0-1)", []int{0, 1}},
		{"gpu:3(IDX:0,2-3)", []int{0, 2, 3}},
		{"gpu:a100:1(IDX:0),gpu:v100:1(IDX:2)", []int{0, 2}},
		{"gpu:a100:1(IDX:1),gpu:v100:0(IDX:)", []int{1}},
		{"gpu:a100:0(IDX:N/A)", nil},
		{"shard:2(2/4,0/4)", nil},
		{"gpu:2", nil},
		{"gpu:2(IDX:3-1)", nil},
	}
	for _, tt := range tests {
		if got := parseGresIndices(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("parseGresIndices(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// Slurm 23.02 and later changed numbers, states and exit codes into
// objects and lists: the parsers read both.
func TestParseNewerSchemas(t *testing.T) {
	jobs, err := ParseJobs([]byte(`{"jobs":[{"job_id":{"set":true,"infinite":false,"number":42},"name":"gpuportal-1",
		"job_state":["FAILED"],"exit_code":{"status":["EXITED"],"return_code":{"set":true,"number":3}},
		"start_time":{"set":true,"number":1700000000},"end_time":{"set":true,"number":1700000100}},
		{"job_id":43,"job_state":["CANCELLED"],"exit_code":{"status":["SIGNALED"],"return_code":{"set":true,"number":0},"signal":{"signal_id":{"set":true,"number":9},"name":"KILL"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if code, sig := jobs[0].ExitCode(); jobs[0].ID != 42 || jobs[0].State != "FAILED" || code != 3 || sig != 0 || jobs[0].EndTime.Unix() != 1700000100 {
		t.Errorf("job = %+v, exit %d %v", jobs[0], code, sig)
	}
	if code, sig := jobs[1].ExitCode(); code != -1 || sig != syscall.SIGKILL {
		t.Errorf("killed job: exit %d signal %v", code, sig)
	}
	nodes, err := ParseNodes([]byte(`{"nodes":[{"name":"a","state":["IDLE","DRAIN"],"cpus":8,"real_memory":{"set":true,"number":1024},"gres":"gpu:1"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := nodes[0]; n.State != "IDLE" || !n.Draining() || n.MemMiB != 1024 || len(n.GPUs) != 1 {
		t.Errorf("node = %+v", n)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		`not json`,
		`{"errors":[{"error":"Unable to contact slurm controller (connect failure)","error_number":1007}],"jobs":[]}`,
		`{"jobs":[{"job_id":0}]}`,
		`{"jobs":[{"job_id":1,"exit_code":-5}]}`,
		`{"jobs":[{"job_id":1e300}]}`,
	} {
		if _, err := ParseJobs([]byte(in)); err == nil {
			t.Errorf("ParseJobs(%s): no error", in)
		}
	}
	for _, in := range []string{
		`{"nodes":[{"state":"idle"}]}`,
		`{"nodes":[{"name":"a","gres":"gpu:x"}]}`,
		`{"nodes":[{"name":"a","cpus":-1}]}`,
		`{"errors":[{"description":"nope"}]}`,
	} {
		if _, err := ParseNodes([]byte(in)); err == nil {
			t.Errorf("ParseNodes(%s): no error", in)
		}
	}
	_, err := ParseJobs([]byte(`{"errors":[{"error":"Unable to contact slurm controller","error_number":1007}]}`))
	if err == nil || !strings.Contains(err.Error(), "Unable to contact slurm controller") {
		t.Errorf("error = %v; want Slurm's", err)
	}
}

func TestParseJobComp(t *testing.T) {
	jobs := ParseJobComp(readFixture(t, "jobcomp.txt"), time.UTC)
	byName := make(map[string]Job)
	for _, j := range jobs {
		byName[j.Name] = j
	}
	tests := []struct {
		name  string
		state string
		code  int
		sig   syscall.Signal
	}{
		{"gpuportal-104", "FAILED", 3, 0},
		{"gpuportal-105", "FAILED", -1, syscall.SIGTERM},
		{"gpuportal-106", "COMPLETED", 0, 0},
		{"gpuportal-2", "COMPLETED", 0, 0},
	}
	for _, tt := range tests {
		j, ok := byName[tt.name]
		if !ok {
			t.Errorf("no record of %s", tt.name)
			continue
		}
		if code, sig := j.ExitCode(); j.State != tt.state || code != tt.code || sig != tt.sig || !j.Finished() {
			t.Errorf("%s: %s exit %d signal %v, want %s %d %v", tt.name, j.State, code, sig, tt.state, tt.code, tt.sig)
		}
		if j.EndTime.IsZero() || j.StartTime.After(j.EndTime) || j.User != "root" || j.Nodes == "" {
			t.Errorf("%s: %+v", tt.name, j)
		}
	}
	if j := ParseJobComp([]byte("JobId=9 Name=my job name JobState=COMPLETED ExitCode=0:0 EndTime=2026-01-02T03:04:05\n"), time.UTC); len(j) != 1 ||
		j[0].Name != "my job name" || !j[0].EndTime.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("name with spaces: %+v", j)
	}
	for _, bad := range []string{"", "JobId=x JobState=FAILED ExitCode=0:0", "JobId=1 JobState=FAILED ExitCode=3", "JobId=1 ExitCode=0:0", "JobId=1 JobState=X ExitCode=999:0"} {
		if j := ParseJobComp([]byte(bad), time.UTC); len(j) != 0 {
			t.Errorf("ParseJobComp(%q) = %+v, want nothing", bad, j)
		}
	}
}

func TestReadJobCompTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobcomp.txt")
	defer func(was int64) { jobCompTail = was }(jobCompTail)
	jobCompTail = 64 << 10
	line := "JobId=1 Name=gpuportal-1 JobState=COMPLETED ExitCode=0:0 EndTime=2026-01-02T03:04:05\n"
	n := int(jobCompTail)/len(line) + 100
	var b strings.Builder
	b.WriteString(strings.Repeat(line, n))
	b.WriteString("JobId=999999 Name=gpuportal-7 JobState=FAILED ExitCode=2:0\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	jobs, err := ReadJobComp(path, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	last := jobs[len(jobs)-1]
	if code, _ := last.ExitCode(); last.ID != 999999 || code != 2 || len(jobs) > n-90 {
		t.Errorf("read %d of %d records, last %+v; want the tail", len(jobs), n+1, last)
	}
	if _, err := ReadJobComp(filepath.Join(t.TempDir(), "none"), time.UTC); err == nil {
		t.Errorf("missing file: no error")
	}
}
