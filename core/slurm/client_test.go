package slurm

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// fakeRunner answers commands from a table and records them.
type fakeRunner struct {
	calls [][]string
	envs  [][]string
	out   map[string]string // by command name
	err   map[string]error
}

func (r *fakeRunner) Run(_ context.Context, env []string, name string, args ...string) ([]byte, error) {
	r.calls = append(r.calls, append([]string{name}, args...))
	r.envs = append(r.envs, env)
	return []byte(r.out[name]), r.err[name]
}

func TestSubmitArgs(t *testing.T) {
	base := Submission{
		Name: "gpuportal-7", Comment: "gpuportal job 7 gpus=1,2", Node: "n1", GPUs: 2, CPUs: 4, MemMiB: 1024,
		Dir: "/shared/jobs/7", Output: "/shared/jobs/7/output.log", Held: true,
		Script: "/shared/gpuportal-job.sh", Args: []string{"python", "-u", "train.py", "--lr=$(rm -rf /)"},
	}
	tests := []struct {
		name string
		edit func(*Submission)
		want []string
		err  bool
	}{
		{"held and pinned", func(*Submission) {}, []string{
			"--parsable", "--hold", "--job-name=gpuportal-7", "--comment=gpuportal job 7 gpus=1,2",
			"--nodelist=n1", "--nodes=1", "--ntasks=1", "--cpus-per-task=4", "--mem=1024M", "--gres=gpu:2",
			"--chdir=/shared/jobs/7", "--output=/shared/jobs/7/output.log", "--open-mode=append",
			"--no-requeue", "--export=ALL", "--", "/shared/gpuportal-job.sh",
			"python", "-u", "train.py", "--lr=$(rm -rf /)"}, false},
		{"partition, user and group", func(s *Submission) {
			s.Partition, s.User, s.Group, s.Held, s.Comment = "gpu", "alice", "1001", false, ""
		}, []string{
			"--parsable", "--job-name=gpuportal-7", "--partition=gpu",
			"--nodelist=n1", "--nodes=1", "--ntasks=1", "--cpus-per-task=4", "--mem=1024M", "--gres=gpu:2", "--uid=alice", "--gid=1001",
			"--chdir=/shared/jobs/7", "--output=/shared/jobs/7/output.log", "--open-mode=append",
			"--no-requeue", "--export=ALL", "--", "/shared/gpuportal-job.sh",
			"python", "-u", "train.py", "--lr=$(rm -rf /)"}, false},
		{"no gres for a GPU it shares", func(s *Submission) { s.GPUs, s.Args = 0, nil }, []string{
			"--parsable", "--hold", "--job-name=gpuportal-7", "--comment=gpuportal job 7 gpus=1,2",
			"--nodelist=n1", "--nodes=1", "--ntasks=1", "--cpus-per-task=4", "--mem=1024M",
			"--chdir=/shared/jobs/7", "--output=/shared/jobs/7/output.log", "--open-mode=append",
			"--no-requeue", "--export=ALL", "--", "/shared/gpuportal-job.sh"}, false},
		{"no node", func(s *Submission) { s.Node = "" }, nil, true},
		{"no memory: Slurm would give the whole node", func(s *Submission) { s.MemMiB = 0 }, nil, true},
		{"no CPU", func(s *Submission) { s.CPUs = 0 }, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			tt.edit(&s)
			got, err := SubmitArgs(s)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("args:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestCLICommandLines(t *testing.T) {
	ctx := context.Background()
	r := &fakeRunner{out: map[string]string{
		"sbatch": "1234;cluster\n",
		"squeue": string(readFixture(t, "squeue-mixed.json")),
		"sinfo":  string(readFixture(t, "sinfo-drain.json")),
	}}
	c := CLI{Runner: r}
	env := []string{"PATH=/usr/bin", "GPUPORTAL_JOB_ID=7"}
	id, err := c.Submit(ctx, Submission{Node: "n1", CPUs: 1, MemMiB: 1, Dir: "/d", Output: "/d/o", Script: "/s", Env: env})
	if err != nil || id != 1234 {
		t.Fatalf("Submit = %d, %v", id, err)
	}
	if !slices.Equal(r.envs[0], env) {
		t.Errorf("sbatch environment %q, want exactly %q", r.envs[0], env)
	}
	for _, step := range []func() error{
		func() error { return c.Release(ctx, 1234) },
		func() error { return c.Signal(ctx, 1234, "TERM") },
		func() error { return c.Cancel(ctx, 1234) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := c.Jobs(ctx)
	if err != nil || len(jobs) != 5 {
		t.Fatalf("Jobs = %d jobs, %v", len(jobs), err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("Nodes = %d nodes, %v", len(nodes), err)
	}
	want := [][]string{
		{"sbatch", "--parsable", "--nodelist=n1", "--nodes=1", "--ntasks=1", "--cpus-per-task=1", "--mem=1M",
			"--chdir=/d", "--output=/d/o", "--open-mode=append", "--no-requeue", "--export=ALL", "--", "/s"},
		{"scontrol", "release", "1234"},
		{"scancel", "--full", "--signal=TERM", "1234"},
		{"scancel", "1234"},
		{"squeue", "--json"},
		{"sinfo", "--json"},
	}
	if len(r.calls) != len(want) {
		t.Fatalf("calls %q", r.calls)
	}
	for i := range want {
		if !slices.Equal(r.calls[i], want[i]) {
			t.Errorf("call %d = %q, want %q", i, r.calls[i], want[i])
		}
		if i > 0 && r.envs[i] != nil {
			t.Errorf("call %d got an environment", i)
		}
	}
}

func TestCLIErrors(t *testing.T) {
	ctx := context.Background()
	fail := errors.New("exit status 1")
	for _, tt := range []struct {
		name string
		r    *fakeRunner
		call func(CLI) error
		want string
	}{
		{"sbatch fails", &fakeRunner{err: map[string]error{"sbatch": fail}},
			func(c CLI) error {
				_, err := c.Submit(ctx, Submission{Node: "n", CPUs: 1, MemMiB: 1, Dir: "/", Output: "/o", Script: "/s"})
				return err
			}, "exit status 1"},
		{"sbatch says no ID", &fakeRunner{out: map[string]string{"sbatch": "Submitted batch job"}},
			func(c CLI) error {
				_, err := c.Submit(ctx, Submission{Node: "n", CPUs: 1, MemMiB: 1, Dir: "/", Output: "/o", Script: "/s"})
				return err
			}, "no job ID"},
		{"squeue is not JSON", &fakeRunner{out: map[string]string{"squeue": "JOBID PARTITION"}},
			func(c CLI) error { _, err := c.Jobs(ctx); return err }, "squeue --json: parse"},
		{"sinfo reports an error", &fakeRunner{out: map[string]string{"sinfo": `{"errors":[{"error":"Unable to contact slurm controller","error_number":1007}],"nodes":[]}`}},
			func(c CLI) error { _, err := c.Nodes(ctx); return err }, "Unable to contact slurm controller"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(CLI{Runner: tt.r})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to say %q", err, tt.want)
			}
		})
	}
}

func TestExecRunnerKeepsStderr(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	r := ExecRunner{}
	out, err := r.Run(context.Background(), []string{"A=from-env"}, sh, "-c", `echo "$A"; echo "sbatch: error: Invalid node name specified" >&2; exit 1`)
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Stderr != "sbatch: error: Invalid node name specified" || string(out) != "from-env\n" {
		t.Fatalf("out %q, err %v", out, err)
	}
	if !strings.Contains(err.Error(), "Invalid node name specified") {
		t.Errorf("error %q lacks the command's stderr", err)
	}
	if _, err := (ExecRunner{Bin: t.TempDir()}).Run(context.Background(), nil, "sbatch"); err == nil {
		t.Errorf("a command missing from Bin ran")
	}
}
