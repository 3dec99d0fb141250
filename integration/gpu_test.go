//go:build gpu

// The real-GPU check, run by hand on a machine with an NVIDIA GPU, PyTorch
// and nvidia-smi (a lab's GPU machine, or the H200 lent to a session):
//
//	CGO_ENABLED=1 go build -tags nvml -o /tmp/gpuportal ./cmd/gpuportal
//	go test -c -tags gpu -o /tmp/it.test ./integration
//	cd integration && GPUPORTAL_TEST_BINARY=/tmp/gpuportal /tmp/it.test -test.run TestRealGPU -test.v
//
// CI has no GPU and never builds this file. It fails, rather than skips,
// where a part is missing: it is only run where they are meant to be.

package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// smiApp is one process on the GPU as nvidia-smi lists it.
type smiApp struct {
	pid    int
	memMiB int64
}

// smiSample is what nvidia-smi said at one moment.
type smiSample struct {
	at      time.Time
	usedMiB int64
	utilPct int
	apps    []smiApp
}

func nvidiaSMI(ctx context.Context, args ...string) ([][]string, error) {
	out, err := exec.CommandContext(ctx, "nvidia-smi", append(args, "--format=csv,noheader,nounits")...).Output()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi %s: %w", strings.Join(args, " "), err)
	}
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l == "" || strings.Contains(l, "No running processes") {
			continue
		}
		f := strings.Split(l, ",")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		rows = append(rows, f)
	}
	return rows, nil
}

// readSMI reads GPU 0's used memory and utilization and its processes.
func readSMI(ctx context.Context) (smiSample, error) {
	s := smiSample{at: time.Now()}
	gpu, err := nvidiaSMI(ctx, "--id=0", "--query-gpu=memory.used,utilization.gpu")
	if err != nil || len(gpu) != 1 || len(gpu[0]) != 2 {
		return s, fmt.Errorf("GPU 0's memory: %v (%q)", err, gpu)
	}
	s.usedMiB, _ = strconv.ParseInt(gpu[0][0], 10, 64)
	s.utilPct, _ = strconv.Atoi(gpu[0][1])
	apps, err := nvidiaSMI(ctx, "--id=0", "--query-compute-apps=pid,used_memory")
	if err != nil {
		return s, err
	}
	for _, a := range apps {
		if len(a) != 2 {
			continue
		}
		pid, _ := strconv.Atoi(a[0])
		mem, _ := strconv.ParseInt(a[1], 10, 64)
		s.apps = append(s.apps, smiApp{pid, mem})
	}
	return s, nil
}

// smiWatch samples nvidia-smi every 250 ms until stopped.
type smiWatch struct {
	mu      sync.Mutex
	samples []smiSample
	stop    context.CancelFunc
	done    chan struct{}
}

func watchSMI(t *testing.T) *smiWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &smiWatch{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			if s, err := readSMI(ctx); err == nil {
				w.mu.Lock()
				w.samples = append(w.samples, s)
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { w.stop(); <-w.done })
	return w
}

func (w *smiWatch) all() []smiSample {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]smiSample(nil), w.samples...)
}

// gpuStep is one line of train.py's trace.
type gpuStep struct {
	at        time.Time
	job, run  int64
	pid, step int
}

func readSteps(t *testing.T, dir string, job int64) []gpuStep {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, fmt.Sprintf("job-%d.trace", job)))
	if err != nil {
		return nil
	}
	defer f.Close()
	var steps []gpuStep
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var ms int64
		var s gpuStep
		if n, _ := fmt.Sscanf(sc.Text(), "%d %d %d %d %d", &ms, &s.job, &s.run, &s.pid, &s.step); n == 5 {
			s.at = time.UnixMilli(ms)
			steps = append(steps, s)
		}
	}
	return steps
}

// pidsOf is the PIDs a job's runs traced, by run.
func pidsOf(steps []gpuStep) map[int]int64 {
	m := map[int]int64{}
	for _, s := range steps {
		m[s.pid] = s.run
	}
	return m
}

// portalPoint is GPU 0's latest point as the API gives it.
type portalPoint struct {
	T       int64   `json:"t"`
	UsedMiB int64   `json:"mem_used_mib"`
	MemMiB  int64   `json:"mem_mib"`
	ResMiB  *int64  `json:"mem_reserved_mib"`
	Util    float64 `json:"util_pct"`
	Power   float64 `json:"power_w"`
	Jobs    []struct {
		JobID  int64 `json:"job_id"`
		MemMiB int64 `json:"mem_mib"`
	} `json:"jobs"`
	Held []int64 `json:"held"`
}

func latestPoint(t *testing.T, admin *api) (string, portalPoint) {
	t.Helper()
	var series []struct {
		Node   string        `json:"node"`
		Model  string        `json:"model"`
		Points []portalPoint `json:"points"`
	}
	since := time.Now().Add(-30 * time.Second).Unix()
	if st := admin.do(http.MethodGet, fmt.Sprintf("/api/v1/gpus?since=%d", since), nil, &series); st != http.StatusOK || len(series) != 1 {
		t.Fatalf("GET /api/v1/gpus: status %d, %d series; want one GPU", st, len(series))
	}
	if len(series[0].Points) == 0 {
		return series[0].Model, portalPoint{}
	}
	return series[0].Model, series[0].Points[len(series[0].Points)-1]
}

func (p portalPoint) jobMem(id int64) (int64, bool) {
	for _, j := range p.Jobs {
		if j.JobID == id {
			return j.MemMiB, true
		}
	}
	return 0, false
}

// firstSample is the value of a /metrics series' first sample, whatever its labels.
func firstSample(text, name string) (float64, bool) {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestRealGPU runs real PyTorch jobs on a real GPU under the NVML agent:
//
//  1. memory: a job holding a known amount reads the same in the API (the
//     GPU's point and the job's own series), /metrics and nvidia-smi;
//  2. preemption: a new job preempts it once 2D-LAS demotes it; it saves a
//     checkpoint on SIGTERM (3 s), the new job's process appears on the GPU
//     only after the victim's has gone (nvidia-smi, every 250 ms), and the
//     victim's next run resumes at the step it saved, from its own trace;
//  3. a cancel outlives the server: a job cancelled while it saves (8 s,
//     then exit 0) is ended cancelled by the restarted server after the
//     old one was SIGKILLed, and never runs again; its memory is freed.
func TestRealGPU(t *testing.T) {
	ctx := context.Background()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 with PyTorch is needed: ", err)
	}
	first, err := readSMI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("nvidia-smi before: %d MiB used, %d%% util, %d processes", first.usedMiB, first.utilPct, len(first.apps))
	if out, err := exec.Command(python, "-c", "import torch; assert torch.cuda.is_available(); print(torch.__version__, torch.cuda.get_device_name(0))").CombinedOutput(); err != nil {
		t.Fatalf("PyTorch does not see the GPU: %v: %s", err, out)
	} else {
		t.Logf("PyTorch: %s", strings.TrimSpace(string(out)))
	}

	// Jobs never run as root: an account of their own, if it can use the GPU.
	runAs := "root"
	if os.Geteuid() == 0 {
		unixUser(t, "gpt-gpu")
		out, err := exec.Command("runuser", "-u", "gpt-gpu", "--", python, "-c", "import torch; assert torch.cuda.is_available()").CombinedOutput()
		if err == nil {
			runAs = "gpt-gpu"
		} else {
			t.Logf("account gpt-gpu cannot use the GPU (%v: %s); jobs run as root", err, lastLines(string(out), 1))
		}
	}
	traces := passableDir(t)
	if err := os.Chmod(traces, 0o777); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("testdata/gpu/train.py")
	if err != nil {
		t.Fatal(err)
	}
	train := filepath.Join(traces, "train.py")
	if err := os.WriteFile(train, src, 0o644); err != nil {
		t.Fatal(err)
	}
	job := func(steps int, stepS float64, memMiB int, saveS float64, termExit int) []string {
		return []string{python, train, "--trace", filepath.Join(traces, "job-${GPUPORTAL_JOB_ID}.trace"),
			"--steps", strconv.Itoa(steps), "--step-s", fmt.Sprint(stepS), "--every", "10",
			"--mem-mib", strconv.Itoa(memMiB), "--save-s", fmt.Sprint(saveS), "--term-exit", strconv.Itoa(termExit)}
	}
	// The trace path names the job: the command goes through sh for it.
	sh := func(argv []string) []string {
		q := make([]string, len(argv))
		for i, a := range argv {
			q[i] = `"` + a + `"`
		}
		return []string{"sh", "-c", "exec " + strings.Join(q, " ")}
	}

	data := t.TempDir()
	args := []string{"--data", data, "--heartbeat-timeout", "20s", "--grace", "30s", "--policy", "tiresias-l",
		"--thresholds", "25", "--max-retries", "2"}
	srv := startAgentServer(t, args...)
	agent := startAgent(t, srv.URL, "h", "--gpus", "nvml", "--run-as", runAs, "--work-dir", passableDir(t), "--grace", "30s")
	waitGPUs(t, srv.URL, 1)
	admin := newAPI(t, srv.URL, "admin", "dev")
	alice := newAPI(t, srv.URL, "alice", "dev")
	model, _ := latestPoint(t, admin)
	t.Logf("the agent sees one GPU: %s (jobs run as %s)", model, runAs)
	watch := watchSMI(t)

	// 1. Memory, three ways.
	a := submit(t, alice, map[string]any{"name": "resnet-ish", "gpus": 1, "command": sh(job(400, 0.1, 6144, 3, 143))})
	alice.waitState(a, 60*time.Second, "running")
	eventually(t, 90*time.Second, "job A's first steps", func() bool { return len(readSteps(t, traces, a)) > 20 })
	time.Sleep(3 * time.Second) // a few samples of a steady job
	var (
		pt      portalPoint
		smi     smiSample
		agreed  bool
		lastErr string
	)
	pids := pidsOf(readSteps(t, traces, a))
	for try := 0; try < 10 && !agreed; try++ {
		_, pt = latestPoint(t, admin)
		smi, err = readSMI(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var smiJob int64
		for _, p := range smi.apps {
			if _, ok := pids[p.pid]; ok {
				smiJob += p.memMiB
			}
		}
		jm, ok := pt.jobMem(a)
		agreed = ok && jm == smiJob && pt.UsedMiB == smi.usedMiB
		lastErr = fmt.Sprintf("portal: GPU %d MiB used, job A %d MiB (%v); nvidia-smi: GPU %d MiB used, job A's processes %d MiB (%v)",
			pt.UsedMiB, jm, ok, smi.usedMiB, smiJob, smi.apps)
		if !agreed {
			time.Sleep(time.Second)
		}
	}
	if !agreed {
		t.Errorf("the portal's memory readings disagree with nvidia-smi's: %s", lastErr)
	}
	t.Logf("memory: %s", lastErr)
	res := "absent"
	if pt.ResMiB != nil {
		res = fmt.Sprintf("%d MiB", *pt.ResMiB)
	}
	t.Logf("GPU point: %d of %d MiB, reserved by the driver %s, util %.0f%% (nvidia-smi %d%%), %.0f W, held by %v",
		pt.UsedMiB, pt.MemMiB, res, pt.Util, smi.utilPct, pt.Power, pt.Held)
	var series []struct {
		MemMiB int64 `json:"mem_mib"`
	}
	if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d/memory", a), nil, &series); st != http.StatusOK || len(series) == 0 {
		t.Errorf("GET /api/v1/jobs/%d/memory: status %d, %d points", a, st, len(series))
	} else if jm, _ := pt.jobMem(a); series[len(series)-1].MemMiB != jm {
		t.Errorf("job A's own memory series ends at %d MiB, its GPU's point says %d", series[len(series)-1].MemMiB, jm)
	}
	if used, ok := firstSample(metricsTextWith(t, srv.URL, admin.token), "gpuportal_gpu_memory_used_bytes"); !ok || int64(used)>>20 != pt.UsedMiB {
		// /metrics and the API read the same sample, unless one more arrived between them.
		t.Logf("/metrics gpuportal_gpu_memory_used_bytes = %.0f (%d MiB), API %d MiB", used, int64(used)>>20, pt.UsedMiB)
	}

	// 2. Preemption: A is demoted past 25 GPU-seconds; B preempts it.
	alice.waitQueue(a, 90*time.Second, 1)
	b := submit(t, alice, map[string]any{"name": "short", "gpus": 1, "command": sh(job(60, 0.1, 4096, 0, 143))})
	alice.waitState(b, 120*time.Second, "succeeded")
	ja := alice.waitState(a, 180*time.Second, "succeeded", "failed")
	if ja.State != "succeeded" || ja.Preemptions != 1 {
		t.Errorf("job A: %s, %d preemptions (%s); want succeeded after one", ja.State, ja.Preemptions, ja.Reason)
	}
	stepsA, stepsB := readSteps(t, traces, a), readSteps(t, traces, b)
	runs := map[int64][]gpuStep{}
	for _, s := range stepsA {
		runs[s.run] = append(runs[s.run], s)
	}
	if len(runs) != 2 {
		t.Fatalf("job A traced %d runs, want 2: %v", len(runs), runs)
	}
	r1, r2 := runs[1], runs[2]
	saved := r1[len(r1)-1].step + 1
	if r2[0].step != saved || r2[len(r2)-1].step != 399 {
		t.Errorf("job A's second run traced steps %d..%d; want %d (the step its first run saved at SIGTERM)..399", r2[0].step, r2[len(r2)-1].step, saved)
	}
	t.Logf("job A: run 1 steps 0..%d (pid %d), run 2 steps %d..%d (pid %d): nothing redone", r1[len(r1)-1].step, r1[0].pid, r2[0].step, r2[len(r2)-1].step, r2[0].pid)
	// On the GPU, by nvidia-smi: B's process appears after A's first has gone, A's second after B's.
	pidA1, pidB, pidA2 := r1[0].pid, stepsB[0].pid, r2[0].pid
	lastSeen, firstSeen := map[int]time.Time{}, map[int]time.Time{}
	overlap := 0
	for _, s := range watch.all() {
		on := map[int]bool{}
		for _, p := range s.apps {
			on[p.pid] = true
			if _, ok := firstSeen[p.pid]; !ok {
				firstSeen[p.pid] = s.at
			}
			lastSeen[p.pid] = s.at
		}
		if (on[pidA1] || on[pidA2]) && on[pidB] {
			overlap++
		}
	}
	if overlap > 0 {
		t.Errorf("nvidia-smi saw job A and job B on the GPU together in %d samples", overlap)
	}
	if !firstSeen[pidB].After(lastSeen[pidA1]) || !firstSeen[pidA2].After(lastSeen[pidB]) {
		t.Errorf("on the GPU: A run 1 last seen %s, B first %s last %s, A run 2 first %s; want one after the other",
			lastSeen[pidA1].Format("15:04:05.000"), firstSeen[pidB].Format("15:04:05.000"), lastSeen[pidB].Format("15:04:05.000"), firstSeen[pidA2].Format("15:04:05.000"))
	}
	t.Logf("handover on the GPU: A's run 1 last seen by nvidia-smi %s, B's process first %s (%v later); B last %s, A's run 2 first %s",
		lastSeen[pidA1].Format("15:04:05.000"), firstSeen[pidB].Format("15:04:05.000"), firstSeen[pidB].Sub(lastSeen[pidA1]).Round(time.Millisecond),
		lastSeen[pidB].Format("15:04:05.000"), firstSeen[pidA2].Format("15:04:05.000"))
	t.Logf("/metrics: %s", grepLines(metricsTextWith(t, srv.URL, admin.token), "handover_seconds_sum"))

	// 3. A cancel outlives the server.
	c := submit(t, alice, map[string]any{"name": "saver", "gpus": 1, "retries": 2, "command": sh(job(100000, 0.1, 2048, 8, 0))})
	alice.waitState(c, 60*time.Second, "running")
	eventually(t, 90*time.Second, "job C's first steps", func() bool { return len(readSteps(t, traces, c)) > 10 })
	if st := alice.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", c), nil, nil); st >= 300 {
		t.Fatalf("cancel: status %d", st)
	}
	eventually(t, 30*time.Second, "job C to begin saving", func() bool { return strings.Contains(remoteOutput(data, "h", c), "saving") })
	srv.kill()
	killedAt := time.Now()
	srv2 := startAgentServerAt(t, srv, args...)
	alice2 := newAPI(t, srv2.URL, "alice", "dev")
	jc := alice2.waitState(c, 60*time.Second, "cancelled", "succeeded", "failed")
	if jc.State != "cancelled" || !strings.Contains(jc.Reason, "cancelled by alice") {
		t.Errorf("job C after the restart: %s (%q), want cancelled by alice", jc.State, jc.Reason)
	}
	time.Sleep(3 * time.Second) // a few passes: nothing starts it again
	cRuns := map[int64]bool{}
	for _, s := range readSteps(t, traces, c) {
		cRuns[s.run] = true
	}
	out := remoteOutput(data, "h", c)
	if len(cRuns) != 1 || strings.Count(out, "saved at step") != 1 {
		t.Errorf("job C: %d runs traced, output %q; want one run that saved once", len(cRuns), out)
	}
	end, err := readSMI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(end.apps) != 0 {
		t.Errorf("processes left on the GPU after every job ended: %v", end.apps)
	}
	t.Logf("job C: %s (%s) %v after the server was killed; output:\n%s", jc.State, jc.Reason, time.Since(killedAt).Round(time.Second), out)
	t.Logf("nvidia-smi after: %d MiB used, %d processes", end.usedMiB, len(end.apps))
	for _, id := range []int64{a, b, c} {
		var h []string
		for _, e := range jobHistory(t, alice2, id) {
			h = append(h, e.State+": "+e.Detail)
		}
		t.Logf("job %d history: %q", id, h)
	}
	samples := watch.all()
	sort.Slice(samples, func(i, j int) bool { return samples[i].at.Before(samples[j].at) })
	t.Logf("%d nvidia-smi samples; agent log tail:\n%s", len(samples), lastLines(agent.output(), 15))
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
