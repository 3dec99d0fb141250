package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

func TestJobEnvOwnVariables(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/root", "SECRET=s"}
	tests := []struct {
		name    string
		spec    job.Spec
		ra      *runAs
		want    []string
		wantNot []string
	}{
		{"the job's variables are added", job.Spec{JobID: 5, Env: []string{"LR=0.1", "PATH=/opt/bin"}},
			nil, []string{"LR=0.1", "PATH=/opt/bin"}, []string{"SECRET=s"}},
		{"reserved names never reach the job", job.Spec{JobID: 5, Env: []string{"GPUPORTAL_JOB_ID=1", "CUDA_VISIBLE_DEVICES=9", "1BAD=x"}},
			nil, []string{"GPUPORTAL_JOB_ID=5"}, []string{"GPUPORTAL_JOB_ID=1", "CUDA_VISIBLE_DEVICES=9", "1BAD=x"}},
		{"another user's identity is not overridden", job.Spec{JobID: 5, Env: []string{"HOME=/tmp"}},
			&runAs{name: "alice", home: "/home/alice"}, []string{"HOME=/home/alice"}, []string{"HOME=/tmp"}},
		{"an array task knows its index", job.Spec{JobID: 7, Array: &job.ArrayTask{ID: 5, Index: 2}},
			nil, []string{"GPUPORTAL_ARRAY_JOB_ID=5", "GPUPORTAL_ARRAY_INDEX=2"}, nil},
		// A Slurm script's "--num_workers $SLURM_CPUS_PER_TASK" read an
		// empty variable, which argparse refuses.
		{"a job learns its allocation", job.Spec{JobID: 5, Resources: &job.Resources{CPUMilli: 8500, MemMiB: 65536}},
			nil, []string{"GPUPORTAL_CPUS=9", "SLURM_CPUS_ON_NODE=9", "SLURM_CPUS_PER_TASK=9", "GPUPORTAL_MEM_MIB=65536", "SLURM_MEM_PER_NODE=65536"}, nil},
		{"a process per GPU shares the machine's CPUs", job.Spec{JobID: 5, GPUs: []int{0, 1, 2, 3}, Resources: &job.Resources{CPUMilli: 16000},
			Gang: &job.Gang{Nodes: []job.GangNode{{Name: "n1", GPUs: 4}, {Name: "n2", GPUs: 4}}, TasksPerGPU: true}},
			nil, []string{"GPUPORTAL_CPUS=16", "SLURM_CPUS_ON_NODE=16", "SLURM_CPUS_PER_TASK=4"}, []string{"GPUPORTAL_MEM_MIB="}},
		{"less than a CPU is one", job.Spec{JobID: 5, Resources: &job.Resources{CPUMilli: 300}},
			nil, []string{"GPUPORTAL_CPUS=1", "SLURM_CPUS_PER_TASK=1"}, nil},
		{"no allocation, no variables", job.Spec{JobID: 5, Env: []string{"SLURM_CPUS_PER_TASK=3"}},
			nil, []string{"SLURM_CPUS_PER_TASK=3"}, []string{"GPUPORTAL_CPUS=", "SLURM_CPUS_ON_NODE=", "GPUPORTAL_MEM_MIB="}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := jobEnv(base, tc.spec, "n1", "/w/c", tc.ra, nil)
			for _, w := range tc.want {
				if !slices.Contains(env, w) {
					t.Errorf("env lacks %q: %v", w, env)
				}
			}
			for _, w := range tc.wantNot {
				// "NAME=": no value of NAME at all.
				if slices.ContainsFunc(env, func(kv string) bool { return kv == w || strings.HasSuffix(w, "=") && strings.HasPrefix(kv, w) }) {
					t.Errorf("env has %q: %v", w, env)
				}
			}
		})
	}
}

func TestJobWorkdir(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{
		{"", "/w/jobs/1"},
		{"/data/run/", "/data/run"},
		{"sub", "/w/jobs/1/sub"},
	} {
		if got := jobWorkdir("/w/jobs/1", tc.dir); got != tc.want {
			t.Errorf("jobWorkdir(%q) = %q, want %q", tc.dir, got, tc.want)
		}
	}
}

// A real process sees its variables and starts in its folder; a folder
// that does not exist fails the start with a message in its log.
func TestProcessGetsEnvAndDir(t *testing.T) {
	a, exits := newTestAgent(t, time.Second)
	dir := t.TempDir()
	cmd := []string{"sh", "-c", `echo "LR=$LR dir=$(pwd)"`}
	if err := a.Start(context.Background(), job.Spec{JobID: 8, Command: cmd, GPUs: []int{0}, Env: []string{"LR=3e-4"}, Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if ex := waitExit(t, exits); ex.ExitCode != 0 {
		t.Fatalf("exit = %+v", ex)
	}
	real, _ := filepath.EvalSymlinks(dir)
	b, err := os.ReadFile(a.LogPath(8))
	if err != nil || !strings.Contains(string(b), "LR=3e-4 dir=") || !(strings.Contains(string(b), dir) || strings.Contains(string(b), real)) {
		t.Errorf("output = %q, %v", b, err)
	}
	err = a.Start(context.Background(), job.Spec{JobID: 9, Command: cmd, GPUs: []int{0}, Dir: filepath.Join(dir, "missing")})
	if err == nil {
		waitExit(t, exits)
		t.Fatal("a start in a missing folder succeeded")
	}
	// The folder is what is missing, not the program: the reason read
	// 'fork/exec /usr/bin/sh: no such file or directory (working folder:
	// ...)', naming the program first.
	want := fmt.Sprintf("working folder %s does not exist", filepath.Join(dir, "missing"))
	if b, _ := os.ReadFile(a.LogPath(9)); !strings.Contains(string(b), want) || strings.Contains(string(b), "fork/exec") {
		t.Errorf("log = %q; want %q, without fork/exec", b, want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("start error %q; want %q", err, want)
	}
}

// A run whose time is up, that no server stopped, is stopped by its agent
// a margin later and reported timed out; one that ends in time is not.
func TestTimeLimitBackstop(t *testing.T) {
	exits := make(chan job.Exit, 8)
	a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 2, 8192), WorkDir: t.TempDir(), Grace: time.Second,
		Backstop: 100 * time.Millisecond}, exits)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background(), job.Spec{JobID: 1, Run: 1, Command: []string{"sleep", "30"}, GPUs: []int{0}, TimeLeft: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background(), job.Spec{JobID: 2, Run: 1, Command: []string{"true"}, GPUs: []int{1}, TimeLeft: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	got := map[int64]job.Exit{}
	for range 2 {
		ex := waitExit(t, exits)
		got[ex.JobID] = ex
	}
	if ex := got[1]; ex.EndedAs != job.TimedOut || !strings.Contains(ex.Err, "time limit") {
		t.Errorf("the job past its time: %+v; want it ended timed out", ex)
	}
	if ex := got[2]; ex.EndedAs != "" || ex.ExitCode != 0 {
		t.Errorf("the job in time: %+v", ex)
	}
}
