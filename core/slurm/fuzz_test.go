package slurm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// addFixtures seeds a fuzz test with the records of the testdata files
// whose names start with prefix: each record alone (under list, "jobs" or
// "nodes"), cut down to the fields the parsers read, since the fuzzer
// minimizes large inputs slowly.
func addFixtures(f *testing.F, prefix, list string, fields ...string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", prefix+"*"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no fixtures %s*: %v", prefix, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if list == "" {
			f.Add(b)
			continue
		}
		var doc map[string]json.RawMessage
		var recs []map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		if err := json.Unmarshal(doc[list], &recs); err != nil {
			f.Fatalf("%s: %s: %v", p, list, err)
		}
		for _, rec := range recs {
			cut := make(map[string]any)
			for _, k := range fields {
				if v, ok := rec[k]; ok {
					cut[k] = v
				}
			}
			seed, err := json.Marshal(map[string]any{list: []any{cut}})
			if err != nil {
				f.Fatal(err)
			}
			f.Add(seed)
		}
	}
}

func FuzzParseJobs(f *testing.F) {
	addFixtures(f, "squeue-", "jobs", "job_id", "name", "comment", "user_name", "partition", "job_state",
		"state_reason", "exit_code", "nodes", "required_nodes", "cpus", "memory_per_node", "submit_time",
		"start_time", "end_time", "gres_detail")
	f.Add([]byte(`{"jobs":[{"job_id":{"set":true,"number":1},"job_state":["RUNNING"],"exit_code":{"return_code":3},"gres_detail":["gpu:a:1(IDX:0),gpu:b:1(IDX:2-3)"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := ParseJobs(data)
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.ID <= 0 {
				t.Fatalf("job ID %d accepted", j.ID)
			}
			code, sig := j.ExitCode()
			if (sig != 0) != (code == -1) || code < -1 || code > 255 {
				t.Fatalf("wait status %d decoded as exit %d signal %d", j.WaitStatus, code, sig)
			}
			if len(j.GPUs) > maxGPUsPerNode {
				t.Fatalf("%d GPUs", len(j.GPUs))
			}
			for _, g := range j.GPUs {
				if g < 0 {
					t.Fatalf("GPU index %d", g)
				}
			}
			if j.CPUs < 0 || j.MemMiB < 0 {
				t.Fatalf("job resources %d CPUs %d MiB", j.CPUs, j.MemMiB)
			}
		}
	})
}

func FuzzParseNodes(f *testing.F) {
	addFixtures(f, "sinfo-", "nodes", "name", "state", "state_flags", "reason", "cpus", "real_memory", "gres", "partitions")
	f.Add([]byte(`{"nodes":[{"name":"a","state":["MIXED","DRAIN"],"gres":"gpu:x100:2(S:0-1),shard:4","cpus":{"set":true,"number":4}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, err := ParseNodes(data)
		if err != nil {
			return
		}
		for _, n := range nodes {
			if n.Name == "" || n.CPUs < 0 || n.MemMiB < 0 || len(n.GPUs) > maxGPUsPerNode {
				t.Fatalf("node accepted: %+v", n)
			}
			for i, g := range n.GPUs {
				if g.Index != i {
					t.Fatalf("GPU %d numbered %d", i, g.Index)
				}
			}
			_, _ = n.Lost(), n.Draining()
		}
	})
}

func FuzzParseGres(f *testing.F) {
	for _, s := range []string{"gpu:4", "gpu:a100:2(S:0-1),gpu:v100:2", "gpu:2,shard:8", "(null)", "gpu:a100:1(IDX:0),gpu:v100:1(IDX:2)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		gpus, err := ParseGres(s)
		if err == nil {
			if len(gpus) > maxGPUsPerNode {
				t.Fatalf("%d GPUs from %q", len(gpus), s)
			}
			for i, g := range gpus {
				if g.Index != i || strings.ContainsAny(g.Type, ":,()") {
					t.Fatalf("GPU %+v from %q", g, s)
				}
			}
		}
		idx := parseGresIndices(s)
		if len(idx) > maxGPUsPerNode {
			t.Fatalf("%d indices from %q", len(idx), s)
		}
		for i, g := range idx {
			if g < 0 || (i > 0 && idx[i-1] > g) {
				t.Fatalf("indices %v from %q", idx, s)
			}
		}
		_ = commentGPUs(s)
	})
}

func FuzzParseJobComp(f *testing.F) {
	addFixtures(f, "jobcomp", "")
	f.Add([]byte("JobId=9 Name=a b JobState=FAILED ExitCode=3:0 EndTime=2026-01-02T03:04:05\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, j := range ParseJobComp(data, time.UTC) {
			code, sig := j.ExitCode()
			if j.ID <= 0 || j.State == "" || code < -1 || code > 255 || (sig != 0) != (code == -1) {
				t.Fatalf("record accepted: %+v (exit %d signal %d)", j, code, sig)
			}
		}
	})
}
