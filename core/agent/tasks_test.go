package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// A part of a run on two machines finds the rendezvous in its
// environment and the hostfile in its job folder.
func TestGangPartEnvAndHostfile(t *testing.T) {
	a, exits := newTestAgent(t, time.Second)
	g := &job.Gang{Nodes: []job.GangNode{{Name: "m0", Addr: "10.1.0.5", GPUs: 1}, {Name: "n0", Addr: "10.1.0.6", GPUs: 2}},
		Rank: 1, MasterPort: 29517}
	cmd := []string{"sh", "-c", `echo "$MASTER_ADDR:$MASTER_PORT ws=$WORLD_SIZE nr=$NODE_RANK nn=$NNODES lws=$LOCAL_WORLD_SIZE nodes=$GPUPORTAL_NODES slurm=$SLURM_JOB_ID/$SLURM_NODEID/$SLURM_NTASKS/$SLURM_JOB_NODELIST/$SLURM_GPUS_ON_NODE"; cat "$GPUPORTAL_HOSTFILE"`}
	if err := a.Start(context.Background(), job.Spec{JobID: 4, Run: 1, Command: cmd, GPUs: []int{0, 1}, Gang: g}); err != nil {
		t.Fatal(err)
	}
	if ex := waitExit(t, exits); ex.ExitCode != 0 {
		t.Fatalf("exit %+v", ex)
	}
	b, _ := os.ReadFile(a.LogPath(4))
	want := "10.1.0.5:29517 ws=3 nr=1 nn=2 lws=2 nodes=m0,n0 slurm=4/1/2/m0,n0/2\n10.1.0.5 slots=1\n10.1.0.6 slots=2\n"
	if string(b) != want {
		t.Errorf("output:\n%s\nwant:\n%s", b, want)
	}
	if hf, err := os.ReadFile(filepath.Join(filepath.Dir(a.CheckpointDir(4)), job.HostfileName)); err != nil || string(hf) != g.Hostfile() {
		t.Errorf("hostfile %q, %v", hf, err)
	}
	bad := *g
	bad.MasterPort = 0
	if err := a.Start(context.Background(), job.Spec{JobID: 5, Run: 1, Command: cmd, GPUs: []int{2}, Gang: &bad}); err == nil {
		waitExit(t, exits)
		t.Error("a gang without a port was started")
	}
}

func TestRunTasks(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var stderr bytes.Buffer
	// Each task writes its ranks; all succeed.
	code := RunTasks(ctx, Tasks{N: 3, FirstRank: 4}, []string{"sh", "-c", `echo "$RANK $LOCAL_RANK $SLURM_PROCID" > "$0/$LOCAL_RANK"`, dir}, time.Second, &stderr)
	if code != 0 {
		t.Fatalf("code %d: %s", code, stderr.String())
	}
	for i, want := range []string{"4 0 4\n", "5 1 5\n", "6 2 6\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, string(rune('0'+i)))); string(b) != want {
			t.Errorf("task %d wrote %q, want %q", i, b, want)
		}
	}
	// Task 1 fails at once: the others, which would sleep, are stopped
	// and the code is task 1's.
	start := time.Now()
	stderr.Reset()
	code = RunTasks(ctx, Tasks{N: 3}, []string{"sh", "-c", `[ "$LOCAL_RANK" = 1 ] && exit 7; exec sleep 60`}, time.Second, &stderr)
	if code != 7 || !strings.Contains(stderr.String(), "task 1 (rank 1) ended with code 7") {
		t.Errorf("code %d, stderr %q; want 7 and task 1 named", code, stderr.String())
	}
	if time.Since(start) > 30*time.Second {
		t.Error("the other tasks were not stopped")
	}
	// Ending the context (SIGTERM to run-tasks) stops every task.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(200*time.Millisecond, cancel)
	if code := RunTasks(cctx, Tasks{N: 2}, []string{"sleep", "60"}, time.Second, &stderr); code != 128+15 {
		t.Errorf("stopped: code %d, want %d", code, 128+15)
	}
	if code := RunTasks(ctx, Tasks{}, []string{"true"}, time.Second, &stderr); code != 2 {
		t.Errorf("no tasks: code %d, want 2", code)
	}
}
