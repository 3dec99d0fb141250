package integration

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSbatchScriptUnchanged submits testdata/slurm/sweep.sbatch, an
// unchanged Slurm batch script of an array of 4, with "gpuportal sbatch"
// from a folder of the user's: it prints "Submitted batch job N" as
// sbatch does, says which directives it ignores, and each task writes
// its --output file (sweep-%A_%a.out) in the submit folder, with the
// Slurm variables Slurm would have given it.
func TestSbatchScriptUnchanged(t *testing.T) {
	srv := startServer(t, "--data", t.TempDir(), "--max-retries", "0")
	token := newAPI(t, srv.URL, "alice", "dev").token
	alice := newAPI(t, srv.URL, "alice", "dev")
	script, err := filepath.Abs("../testdata/slurm/sweep.sbatch")
	if err != nil {
		t.Fatal(err)
	}
	submitDir := t.TempDir()
	if err := os.Chmod(submitDir, 0o777); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Dir = submitDir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GPUPORTAL_SERVER=" + srv.URL, "GPUPORTAL_TOKEN=" + token}
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), code
	}

	out, errOut, code := run("sbatch", script)
	m := regexp.MustCompile(`^Submitted batch job (\d+)\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("gpuportal sbatch: code %d\nstdout: %q\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"sweep.sbatch: ignored line 13: --partition=gpu: gpuportal has queues of its own",
		"sweep.sbatch: ignored line 14: --mail-type=END,FAIL: notifications follow your settings",
		"sweep.sbatch: ignored line 15: --mail-user=alice@example.org",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	first, _ := strconv.ParseInt(m[1], 10, 64)
	lrs := []string{"0.1", "0.01", "0.001", "0.0001"}
	for i := range 4 {
		id := first + int64(i)
		j := alice.waitState(id, 60*time.Second, "succeeded", "failed", "cancelled")
		if j.State != "succeeded" || j.Name != fmt.Sprintf("sweep[%d]", i) {
			t.Fatalf("task %d (job %d) = %+v", i, id, j)
		}
		file := filepath.Join(submitDir, fmt.Sprintf("sweep-%d_%d.out", first, i))
		b, err := os.ReadFile(file)
		want := fmt.Sprintf("job %d array %d task %d name sweep\nntasks 1 nodeid 0 nodes 1 gpus 1\nlr %s default 0.01\nsubmitted from %s, runs in %s\n",
			id, first, i, lrs[i], submitDir, submitDir)
		if err != nil || string(b) != want {
			t.Errorf("task %d's output %s:\n%s (%v)\nwant:\n%s", i, file, b, err, want)
		}
	}

	// The same script through gpuportal job submit, with the command
	// line over the directives; a bad directive names its line.
	out, errOut, code = run("job", "submit", "--parsable", "--name", "single", "--array", "2", script)
	if code != 0 {
		t.Fatalf("job submit SCRIPT: %d %s", code, errOut)
	}
	id, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if j := alice.waitState(id, 60*time.Second, "succeeded", "failed"); j.State != "succeeded" || !strings.HasPrefix(j.Name, "single") {
		t.Errorf("job submit SCRIPT: %+v", j)
	}
	if b, _ := os.ReadFile(filepath.Join(submitDir, fmt.Sprintf("sweep-%d_2.out", id))); !strings.Contains(string(b), fmt.Sprintf("job %d array %d task 2 name single\n", id, id)) {
		t.Errorf("job submit SCRIPT's output: %q", b)
	}
	// squeue's view of them, and job list --format's.
	out, errOut, code = run("squeue", "-t", "CD", "-o", "%i %j %T %b %D")
	var want strings.Builder
	want.WriteString("JOBID NAME STATE TRES_PER_NODE NODES\n")
	for i := range 4 {
		fmt.Fprintf(&want, "%d_%d sweep[%d] COMPLETED gres/gpu:1 1\n", first, i, i)
	}
	fmt.Fprintf(&want, "%d_2 single[2] COMPLETED gres/gpu:1 1\n", id)
	if code != 0 || out != want.String() {
		t.Errorf("squeue: code %d\n%s%s\nwant:\n%s", code, out, errOut, want.String())
	}
	if out, _, _ := run("job", "list", "--no-headers", "--format", "%.6i|%t|%N"); !strings.Contains(out, fmt.Sprintf("%6s|CD|node-0\n", fmt.Sprintf("%d_0", first))) {
		t.Errorf("job list --format:\n%s", out)
	}
	out, errOut, code = run("sacct", "-j", strconv.FormatInt(first, 10), "-P", "-o", "JobID,JobName,State,ExitCode,AllocTRES,NNodes")
	want.Reset()
	want.WriteString("JobID|JobName|State|ExitCode|AllocTRES|NNodes\n")
	for i := range 4 {
		fmt.Fprintf(&want, "%d_%d|sweep[%d]|COMPLETED|0:0|gres/gpu=1|1\n", first, i, i)
	}
	if code != 0 || out != want.String() {
		t.Errorf("sacct: code %d\n%s%s\nwant:\n%s", code, out, errOut, want.String())
	}
	// sbatchScript writes script as name in the submit folder, submits it
	// with sbatch and returns its job's ID.
	sbatchScript := func(name, script string) int64 {
		path := filepath.Join(submitDir, name)
		if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := run("sbatch", path)
		var id int64
		if _, err := fmt.Sscanf(out, "Submitted batch job %d", &id); code != 0 || err != nil {
			t.Fatalf("sbatch %s: code %d, %q %q", name, code, out, errOut)
		}
		return id
	}
	// scancel, as Slurm's users type it, cancels a job.
	longID := sbatchScript("long.sbatch", "#!/bin/sh\n#SBATCH --job-name=long\n#SBATCH --gres=gpu:8\nsleep 600\n")
	if out, errOut, code := run("scancel", strconv.FormatInt(longID, 10)); code != 0 || !strings.Contains(out, fmt.Sprintf("job %d", longID)) || !strings.Contains(out, "cancel") {
		t.Errorf("scancel %d: code %d, %q %q", longID, code, out, errOut)
	}
	eventually(t, 30*time.Second, "sacct to say the job was cancelled", func() bool {
		out, _, _ := run("sacct", "-j", strconv.FormatInt(longID, 10), "-P", "-n", "-o", "JobID,State")
		return strings.Contains(out, "CANCELLED")
	})
	// A run a signal ends shows that signal, as Slurm's sacct does: 0:11
	// for a segmentation fault, not 0:9 for every signal.
	segvID := sbatchScript("segv.sbatch", "#!/bin/sh\n#SBATCH --job-name=segv\nkill -SEGV $$\n")
	if j := alice.waitState(segvID, 60*time.Second, "succeeded", "failed"); j.State != "failed" {
		t.Fatalf("segv.sbatch: %+v, want failed", j)
	}
	if out, errOut, code := run("sacct", "-j", strconv.FormatInt(segvID, 10), "-P", "-n", "-o", "JobID,State,ExitCode"); code != 0 || out != fmt.Sprintf("%d|FAILED|0:11\n", segvID) {
		t.Errorf("sacct of a job killed by SIGSEGV: code %d, %q %q; want \"%d|FAILED|0:11\"", code, out, errOut, segvID)
	}
	// srun steps in a script on two machines (testdata/slurm/steps.sbatch).
	steps, err := filepath.Abs("../testdata/slurm/steps.sbatch")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run("sbatch", steps)
	var stepsID int64
	if _, err := fmt.Sscanf(out, "Submitted batch job %d", &stepsID); code != 0 || err != nil {
		t.Fatalf("sbatch steps.sbatch: code %d, %q %q", code, out, errOut)
	}
	if j := alice.waitState(stepsID, 90*time.Second, "succeeded", "failed"); j.State != "succeeded" || len(j.Placement) != 8 {
		t.Fatalf("steps.sbatch: %+v (%s)", j, jobLog(t, alice, stepsID))
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(submitDir, fmt.Sprintf("steps-%d-%s", stepsID, name)))
		if err != nil {
			t.Errorf("step file %s: %v (output: %s)", name, err, jobLog(t, alice, stepsID))
		}
		return string(b)
	}
	for r := range 2 {
		if got, want := read(fmt.Sprintf("prepare-%d", r)), fmt.Sprintf("prepare %d of 2 on machine %d\n", r, r); got != want {
			t.Errorf("srun's step on machine %d wrote %q, want %q", r, got, want)
		}
		if got := read(fmt.Sprintf("code-%d", r)); got != "code 3\n" {
			t.Errorf("a failing step's code on machine %d: %q, want \"code 3\"", r, got)
		}
	}
	if got := read("once"); got != "download on machine 0, a step of 1\n" {
		t.Errorf("srun -n 1 wrote %q, want one line from machine 0", got)
	}
	for r := range 8 {
		if got, want := read(fmt.Sprintf("rank-%d", r)), fmt.Sprintf("rank %d local %d of 8 torch %d %d 8\n", r, r%4, r, r%4); got != want {
			t.Errorf("srun --ntasks-per-node=4, rank %d: %q, want %q", r, got, want)
		}
	}

	// Each machine's output: the first's by default, another's by name.
	if out, errOut, code := run("job", "logs", "--node", "node-1", strconv.FormatInt(stepsID, 10)); code != 0 ||
		!strings.Contains(out, "--ntasks=1: the step runs as tasks 0 to 0 of the job's 2; task 1 skips it") {
		t.Errorf("job logs --node node-1: code %d, %q %q; want the skipped step said", code, out, errOut)
	}
	if out, _, code := run("job", "logs", strconv.FormatInt(stepsID, 10)); code != 0 || strings.Contains(out, "skips it") {
		t.Errorf("job logs (node-0's, rank 0): code %d, %q; want no skipped step", code, out)
	}
	if _, errOut, code := run("job", "logs", "--node", "node-7", strconv.FormatInt(stepsID, 10)); code == 0 || !strings.Contains(errOut, "node-7") || !strings.Contains(errOut, "node") {
		t.Errorf("job logs --node node-7: code %d, %q; want an error naming the machine", code, errOut)
	} else {
		t.Logf("job logs --node node-7: %s", strings.TrimSpace(errOut))
	}

	// Fewer tasks a machine than GPUs: the script runs once, and a plain
	// srun starts the tasks the script asked for, as Slurm's would.
	pairID := sbatchScript("pair.sbatch", "#!/bin/bash\n#SBATCH --job-name=pair\n#SBATCH --gres=gpu:4\n#SBATCH --ntasks-per-node=2\n"+
		`srun bash -c 'echo "$SLURM_PROCID $SLURM_LOCALID $SLURM_NTASKS" > "pair-$SLURM_JOB_ID-$SLURM_PROCID"'`+"\n")
	if j := alice.waitState(pairID, 60*time.Second, "succeeded", "failed"); j.State != "succeeded" {
		t.Fatalf("pair.sbatch: %+v (%s)", j, jobLog(t, alice, pairID))
	}
	for r := range 2 {
		b, err := os.ReadFile(filepath.Join(submitDir, fmt.Sprintf("pair-%d-%d", pairID, r)))
		if want := fmt.Sprintf("%d %d 2\n", r, r); err != nil || string(b) != want {
			t.Errorf("--ntasks-per-node=2 with 4 GPUs, srun's task %d wrote %q (%v), want %q", r, b, err, want)
		}
	}

	// A script sizes its workers by the CPUs it was given: the same figure
	// as its job's allocation in the API and sacct's AllocCPUS, while it
	// runs (an empty $SLURM_CPUS_PER_TASK before, which
	// "--num_workers $SLURM_CPUS_PER_TASK" fails on).
	workersID := sbatchScript("workers.sbatch", "#!/bin/sh\n#SBATCH --job-name=workers\n#SBATCH --gres=gpu:2\n#SBATCH --cpus-per-task=8\n#SBATCH --mem=32G\n"+
		`echo "$GPUPORTAL_CPUS $SLURM_CPUS_ON_NODE $SLURM_CPUS_PER_TASK $GPUPORTAL_MEM_MIB $SLURM_MEM_PER_NODE" > "workers-$SLURM_JOB_ID.tmp"`+"\n"+
		`mv "workers-$SLURM_JOB_ID.tmp" "workers-$SLURM_JOB_ID"; sleep 600`+"\n")
	var told string
	eventually(t, 60*time.Second, "the workers script to write what it was told", func() bool {
		b, err := os.ReadFile(filepath.Join(submitDir, fmt.Sprintf("workers-%d", workersID)))
		told = strings.TrimSpace(string(b))
		return err == nil
	})
	var withRes struct {
		Resources struct {
			Allocations []struct {
				CPUMilli int64 `json:"cpu_milli"`
				MemMiB   int64 `json:"mem_mib"`
			} `json:"allocations"`
		} `json:"resources"`
	}
	alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", workersID), nil, &withRes)
	if a := withRes.Resources.Allocations; len(a) != 1 || a[0].CPUMilli <= 0 || a[0].MemMiB <= 0 {
		t.Fatalf("the workers job's allocation: %+v", withRes)
	}
	a := withRes.Resources.Allocations[0]
	cpus := (a.CPUMilli + 999) / 1000
	if want := fmt.Sprintf("%d %d %d %d %d", cpus, cpus, cpus, a.MemMiB, a.MemMiB); told != want {
		t.Errorf("the script was told %q (GPUPORTAL_CPUS SLURM_CPUS_ON_NODE SLURM_CPUS_PER_TASK GPUPORTAL_MEM_MIB SLURM_MEM_PER_NODE), want %q from its allocation", told, want)
	}
	if out, errOut, code := run("sacct", "-j", strconv.FormatInt(workersID, 10), "-P", "-n", "-o", "AllocCPUS"); code != 0 || out != fmt.Sprintf("%d\n", cpus) {
		t.Errorf("sacct's AllocCPUS: code %d, %q %q; want %d", code, out, errOut, cpus)
	}
	if _, errOut, code := run("scancel", strconv.FormatInt(workersID, 10)); code != 0 {
		t.Errorf("scancel the workers job: %s", errOut)
	}
	// Once it has ended, sacct still says what it was given (it said 0).
	var ended string
	eventually(t, 60*time.Second, "the workers job to end, sacct saying its CPUs", func() bool {
		out, _, _ := run("sacct", "-j", strconv.FormatInt(workersID, 10), "-P", "-n", "-o", "State,AllocCPUS")
		ended = strings.TrimSpace(out)
		return strings.HasPrefix(ended, "CANCELLED")
	})
	if want := fmt.Sprintf("CANCELLED|%d", cpus); ended != want {
		t.Errorf("sacct of the ended workers job: %q, want %q", ended, want)
	}

	bad := filepath.Join(submitDir, "bad.sbatch")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\n#SBATCH --job-name=x\n#SBATCH --time=soon\necho no\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run("sbatch", bad); code == 0 || !strings.Contains(errOut, "bad.sbatch line 3: #SBATCH --time=soon: ") {
		t.Errorf("a bad directive: code %d, stderr %q; want the line and directive named", code, errOut)
	}
}
