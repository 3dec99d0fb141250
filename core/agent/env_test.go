package agent

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/internal/testneed"
)

func TestJobEnv(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/root", "USER=root", "LANG=C.UTF-8", "LC_ALL=C", "GPUPORTAL_AGENT_TOKEN=secret", "CUDA_VISIBLE_DEVICES=7",
		"GPUPORTAL_JOB_ID=99", "AWS_SECRET_ACCESS_KEY=k", "PGPASSWORD=p", "LD_LIBRARY_PATH=/usr/local/cuda/lib64"}
	spec := job.Spec{JobID: 5, Run: 2, GPUs: []int{2, 0}}
	secrets := []string{"GPUPORTAL_AGENT_TOKEN=secret", "AWS_SECRET_ACCESS_KEY=k", "PGPASSWORD=p"}
	tests := []struct {
		name    string
		base    []string
		ra      *runAs
		pass    []string
		want    []string
		wantNot []string
	}{
		{"own user keeps its identity, the minimal environment and nothing else", base, nil, nil,
			[]string{"PATH=/bin", "HOME=/root", "USER=root", "LANG=C.UTF-8", "LC_ALL=C", "CUDA_VISIBLE_DEVICES=2,0", "GPUPORTAL_JOB_ID=5",
				"GPUPORTAL_RUN=2", "GPUPORTAL_CHECKPOINT_DIR=/w/jobs/5/checkpoint"},
			append([]string{"CUDA_VISIBLE_DEVICES=7", "GPUPORTAL_JOB_ID=99", "LD_LIBRARY_PATH=/usr/local/cuda/lib64"}, secrets...)},
		{"another user gets its own identity", base, &runAs{name: "alice", home: "/home/alice"}, nil,
			[]string{"PATH=/bin", "HOME=/home/alice", "USER=alice", "LOGNAME=alice", "GPUPORTAL_JOB_ID=5"},
			append([]string{"HOME=/root", "USER=root"}, secrets...)},
		{"the operator passes named variables through", base, nil, []string{"LD_LIBRARY_PATH"},
			[]string{"LD_LIBRARY_PATH=/usr/local/cuda/lib64"}, secrets},
		{"no PATH: a default one", []string{"HOME=/root"}, nil, nil, []string{"PATH=" + DefaultPath}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := jobEnv(tc.base, spec, "n1", "/w/jobs/5/checkpoint", tc.ra, tc.pass)
			for _, w := range tc.want {
				if !slices.Contains(env, w) {
					t.Errorf("env lacks %q: %v", w, env)
				}
			}
			for _, w := range tc.wantNot {
				if slices.Contains(env, w) {
					t.Errorf("env has %q: %v", w, env)
				}
			}
		})
	}
}

func TestCheckPassEnv(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"LD_LIBRARY_PATH", "NCCL_DEBUG"}, ""},
		{[]string{"1BAD"}, "not a variable name"},
		{[]string{"A=B"}, "not a variable name"},
		{[]string{"GPUPORTAL_AGENT_TOKEN"}, "set by the agent"},
		{[]string{"CUDA_VISIBLE_DEVICES"}, "set by the agent"},
	} {
		err := CheckPassEnv(tc.names)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckPassEnv(%q) = %v, want %q", tc.names, err, tc.want)
		}
	}
}

func TestLookupRunAs(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		testneed.Missing(t, "no current user: %v", err)
	}
	myUID, _ := strconv.Atoi(me.Uid)
	tests := []struct {
		name     string
		user     string
		euid     int
		wantNil  bool
		wantCred bool
		wantErr  string
	}{
		{"no user: the agent's own", "", 0, true, false, ""},
		{"unknown user", "no-such-user-gpuportal", 0, false, false, "no-such-user-gpuportal"},
		{"the agent's own user needs no switch", me.Username, myUID, false, false, ""},
		{"root may switch to another user", "nobody", 0, false, true, ""},
		{"others cannot switch users", "nobody", 12345, false, false, "cannot switch users"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ra, err := lookupRunAs(tc.user, tc.euid)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				if tc.user == "nobody" {
					testneed.Missing(t, "no user nobody here: %v", err)
				}
				t.Fatal(err)
			}
			if (ra == nil) != tc.wantNil || (ra != nil && (ra.cred != nil) != tc.wantCred) {
				t.Errorf("runAs = %+v, want nil %v, credential %v", ra, tc.wantNil, tc.wantCred)
			}
		})
	}
}

func TestRootAgentRefusesCommandJobsUnlessAsked(t *testing.T) {
	tests := []struct {
		name       string
		runAs      string
		refuseRoot bool
		command    []string
		wantRefuse bool
	}{
		{"remote agent as root refuses a command", "", true, []string{"true"}, true},
		{"remote agent as root still runs simulated jobs", "", true, nil, false},
		{"--run-as root allows it", "root", true, []string{"true"}, false},
		{"the --dev agent runs as the current user", "", false, []string{"true"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exits := make(chan job.Exit, 1)
			a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 1, 1024), WorkDir: t.TempDir(), RunAs: tc.runAs, RefuseRoot: tc.refuseRoot}, exits)
			if err != nil {
				testneed.Missing(t, "run as %q: %v", tc.runAs, err) // not root here
			}
			a.euid = 0 // as if the agent ran as root
			if a.runAs != nil {
				a.runAs.cred = nil // and was root already
			}
			err = a.Start(context.Background(), job.Spec{JobID: 1, Command: tc.command, SimRemaining: time.Millisecond, GPUs: []int{0}})
			if got := errors.Is(err, ErrRootJobs); got != tc.wantRefuse {
				t.Fatalf("Start: %v; want refused %v", err, tc.wantRefuse)
			}
			if err == nil {
				waitExit(t, exits)
			}
		})
	}
}

func TestRunAsAnotherUser(t *testing.T) {
	needRoot(t) // switching users
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	exits := make(chan job.Exit, 1)
	// nobody must reach its job folder: t.TempDir's parent is private.
	dir, err := os.MkdirTemp("", "gpuportal-runas-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 1, 1024), WorkDir: dir, RunAs: "nobody", RefuseRoot: true}, exits)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(filepath.Join(dir, "jobs"), 0o755)
	cmd := []string{"sh", "-c", `id -u; echo $USER; touch "$GPUPORTAL_CHECKPOINT_DIR/ok"`}
	if err := a.Start(context.Background(), job.Spec{JobID: 3, Command: cmd, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	if ex := waitExit(t, exits); ex.ExitCode != 0 {
		b, _ := os.ReadFile(a.LogPath(3))
		t.Fatalf("exit = %+v, output %s", ex, b)
	}
	b, _ := os.ReadFile(a.LogPath(3))
	if want := nobody.Uid + "\nnobody\n"; string(b) != want {
		t.Errorf("output = %q, want %q", b, want)
	}
	if _, err := os.Stat(filepath.Join(a.CheckpointDir(3), "ok")); err != nil {
		t.Errorf("the job could not write its checkpoint folder: %v", err)
	}
}

func TestCheckpointDirOutlivesRuns(t *testing.T) {
	a, exits := newTestAgent(t, time.Second)
	// Each run resumes from the step the last one saved.
	cmd := []string{"sh", "-c", `f="$GPUPORTAL_CHECKPOINT_DIR/step"; s=$(cat "$f" 2>/dev/null || echo 0); s=$((s+1)); echo $s > "$f"; echo "run $s"`}
	for range 3 {
		if err := a.Start(context.Background(), job.Spec{JobID: 4, Command: cmd, GPUs: []int{0}}); err != nil {
			t.Fatal(err)
		}
		if ex := waitExit(t, exits); ex.ExitCode != 0 {
			t.Fatalf("exit = %+v", ex)
		}
	}
	b, err := os.ReadFile(a.LogPath(4))
	if err != nil {
		t.Fatal(err)
	}
	// The job's own lines, and the agent's word that the second and the
	// third run resume from the checkpoint the one before wrote.
	var own []string
	resumes := 0
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if strings.HasPrefix(line, "gpuportal: ") {
			if strings.Contains(line, "resumes from the checkpoint") {
				resumes++
			}
			continue
		}
		own = append(own, line)
	}
	if strings.Join(own, "\n") != "run 1\nrun 2\nrun 3" || resumes != 2 {
		t.Errorf("output = %q; want three runs, each resuming from the checkpoint of the one before (2 said so)", b)
	}
}

// procs lists processes from pairs of PID and MiB.
func procs(kv ...int) []gpu.ProcMem {
	var out []gpu.ProcMem
	for i := 0; i < len(kv); i += 2 {
		out = append(out, gpu.ProcMem{PID: kv[i], MemMiB: int64(kv[i+1])})
	}
	return out
}

// jobs lists job memory from pairs of job ID and MiB.
func jobs(kv ...int64) []gpu.JobMem {
	var out []gpu.JobMem
	for i := 0; i < len(kv); i += 2 {
		out = append(out, gpu.JobMem{JobID: kv[i], MemMiB: kv[i+1]})
	}
	return out
}

func TestAttributeProcesses(t *testing.T) {
	groups := map[int]int64{100: 7, 200: 8}
	pgid := map[int]int{101: 100, 102: 100, 201: 200, 300: 300}
	pgidOf := func(pid int) (int, error) {
		if g, ok := pgid[pid]; ok {
			return g, nil
		}
		return 0, errors.New("no such process")
	}
	tests := []struct {
		name      string
		in        gpu.Sample
		wantJobs  []gpu.JobMem
		wantProcs []gpu.ProcMem
	}{
		{"processes of one job add up", gpu.Sample{Processes: procs(101, 1000, 102, 500)},
			jobs(7, 1500), nil},
		{"two jobs, and a stranger's process stays", gpu.Sample{Processes: procs(300, 64, 201, 2000, 101, 10)},
			jobs(7, 10, 8, 2000), procs(300, 64)},
		{"a process gone since NVML saw it stays unattributed", gpu.Sample{Processes: procs(999, 5)},
			nil, procs(999, 5)},
		{"adds to jobs the back end already knows", gpu.Sample{Jobs: jobs(8, 100), Processes: procs(201, 50)},
			jobs(8, 150), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.in
			attributeProcesses(&s, groups, pgidOf)
			if !slices.Equal(s.Jobs, tc.wantJobs) || !slices.Equal(s.Processes, tc.wantProcs) {
				t.Errorf("jobs %v processes %v; want %v and %v", s.Jobs, s.Processes, tc.wantJobs, tc.wantProcs)
			}
		})
	}
}

// procBackend reports whatever processes it is told are on GPU 0.
type procBackend struct {
	*gpu.Sim
	procs func() []gpu.ProcMem
}

func (b procBackend) Sample(now time.Time) []gpu.Sample {
	ss := b.Sim.Sample(now)
	ss[0].Processes = b.procs()
	return ss
}

func TestSampleCountsAJobsProcessesAsTheJob(t *testing.T) {
	exits := make(chan job.Exit, 1)
	var a *Local
	backend := procBackend{Sim: gpu.NewSim("n0", 1, 8192), procs: func() []gpu.ProcMem {
		a.mu.Lock()
		defer a.mu.Unlock()
		var ps []gpu.ProcMem
		for _, r := range a.runs {
			ps = append(ps, gpu.ProcMem{PID: r.pgid, MemMiB: 3000}) // the job's main process
		}
		return append(ps, gpu.ProcMem{PID: os.Getpid(), MemMiB: 10}) // not a job's
	}}
	a, err := New(Config{Name: "n0", Backend: backend, WorkDir: t.TempDir(), Grace: time.Second}, exits)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background(), job.Spec{JobID: 11, Command: []string{"sleep", "30"}, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	s := a.Sample(time.Now())[0]
	if len(s.Jobs) != 1 || s.Jobs[0] != (gpu.JobMem{JobID: 11, MemMiB: 3000}) || len(s.Processes) != 1 {
		t.Errorf("sample = %+v; want job 11 holding 3000 MiB and one other process", s)
	}
	_ = a.Stop(context.Background(), job.RunRef{Job: 11})
	waitExit(t, exits)
}

// A job none of whose processes holds memory on its GPU yet holds 0 MiB
// there, not the GPU's used memory (another process's, or what the
// driver reserves): every GPU of the run has its entry.
func TestSampleCountsAJobWithoutProcessesAsNothing(t *testing.T) {
	exits := make(chan job.Exit, 1)
	backend := procBackend{Sim: gpu.NewSim("n0", 2, 8192), procs: func() []gpu.ProcMem {
		return []gpu.ProcMem{{PID: os.Getpid(), MemMiB: 480}} // not the job's
	}}
	a, err := New(Config{Name: "n0", Backend: backend, WorkDir: t.TempDir(), Grace: time.Second}, exits)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background(), job.Spec{JobID: 12, Command: []string{"sleep", "30"}, GPUs: []int{0, 1}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range a.Sample(time.Now()) {
		if len(s.Jobs) != 1 || s.Jobs[0] != (gpu.JobMem{JobID: 12}) || s.Index == 0 && len(s.Processes) != 1 {
			t.Errorf("GPU %d: sample = %+v; want job 12 holding 0 MiB (and on GPU 0 the other process apart)", s.Index, s)
		}
	}
	_ = a.Stop(context.Background(), job.RunRef{Job: 12})
	waitExit(t, exits)
}
