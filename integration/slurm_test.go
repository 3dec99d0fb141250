package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The Slurm tests run gpuportal (serve --executor slurm) in front of a
// throwaway Slurm cluster on this machine: one slurmctld and two slurmd
// (n1, n2), each node with four fake GPUs (character devices made with
// mknod, which is why they need root). Everything lives in a temporary
// folder; authentication is auth/none, so no munge daemon runs and
// nothing system-wide changes. scripts/ensure-slurm installs Slurm.

// slurmTools are the Slurm programs the tests need.
var slurmTools = []string{"slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "squeue", "sinfo"}

// needSlurm skips the test where it cannot run, saying why; in CI
// (CI=true), which runs as root, a missing Slurm fails it.
func needSlurm(t *testing.T) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the Slurm tests need root (fake GPU device files, slurmd): run ./scripts/test as root")
	}
	paths := make(map[string]string)
	for _, name := range slurmTools {
		p, err := exec.LookPath(name)
		if err != nil {
			if _, serr := os.Stat("/usr/sbin/" + name); serr == nil {
				p, err = "/usr/sbin/"+name, nil
			}
		}
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed: scripts/ensure-slurm installs Slurm (apt-get install slurm-wlm munge)", name)
			}
			t.Skipf("%s is not installed: scripts/ensure-slurm installs Slurm as root (apt-get install slurm-wlm munge)", name)
		}
		paths[name] = p
	}
	return paths
}

// slurmCluster is a running throwaway cluster.
type slurmCluster struct {
	t     *testing.T
	dir   string
	conf  string
	tools map[string]string
	ctld  *daemon
	slurm map[string]*daemon // slurmd by node name
}

// daemon is a Slurm daemon run in the foreground.
type daemon struct {
	name string
	path string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// startSlurm starts a two-node cluster with four fake GPUs per node and
// waits until both nodes are idle. It is stopped when t ends: jobs
// cancelled, daemons sent SIGTERM then SIGKILL, stray job processes
// killed.
func startSlurm(t *testing.T) *slurmCluster {
	t.Helper()
	tools := needSlurm(t)
	began := time.Now()
	dir, err := os.MkdirTemp("", "gpuportal-slurm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := &slurmCluster{t: t, dir: dir, conf: filepath.Join(dir, "slurm.conf"), tools: tools, slurm: make(map[string]*daemon)}
	for _, sub := range []string{"dev", "state", "spool", "log", "work"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		dev := filepath.Join(dir, "dev", fmt.Sprintf("nvidia%d", i))
		// Slurm wants GPUs as device files; 195 is NVIDIA's major number.
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 195<<8|i); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("make a fake GPU device: %v", err)
			}
			t.Skipf("cannot make fake GPU device files here (mknod: %v)", err)
		}
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	// The ports are free when chosen, but another test may bind one
	// before the daemons do (slurmctld: "Address already in use"): then
	// the cluster starts again on other ports, on fresh logs.
	for attempt := 1; ; attempt++ {
		err := c.up(host)
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(c.logs(), "Address already in use") {
			t.Fatalf("start the Slurm cluster: %v", err) // c.stop logs the daemons' logs
		}
		t.Logf("Slurm cluster, try %d: %v: a port was taken meanwhile; again on others", attempt, err)
		for _, d := range c.slurm {
			stopDaemon(d)
		}
		stopDaemon(c.ctld)
		logs, _ := filepath.Glob(filepath.Join(dir, "log", "*"))
		for _, l := range logs {
			os.Remove(l)
		}
	}
	t.Logf("Slurm cluster up in %v", time.Since(began).Round(time.Millisecond))
	return c
}

// up writes the cluster's configuration on free ports, starts its
// daemons and waits until both nodes are idle; an error when a daemon
// died or the nodes stayed otherwise for 30 s.
func (c *slurmCluster) up(host string) error {
	t, dir := c.t, c.dir
	ctldPort := freePort(t)
	nodePorts := map[string]int{"n1": freePort(t), "n2": freePort(t)}
	conf := fmt.Sprintf(`ClusterName=gpuportaltest
SlurmctldHost=localhost
SlurmctldPort=%[2]d
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=%[1]s/state
SlurmdSpoolDir=%[1]s/spool/%%n
SlurmctldPidFile=%[1]s/slurmctld.pid
SlurmdPidFile=%[1]s/slurmd-%%n.pid
SlurmctldLogFile=%[1]s/log/slurmctld.log
SlurmdLogFile=%[1]s/log/slurmd-%%n.log
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobCompType=jobcomp/filetxt
JobCompLoc=%[1]s/jobcomp.txt
KillWait=5
ReturnToService=2
SlurmdTimeout=3
MessageTimeout=2
TCPTimeout=2
SlurmdParameters=config_overrides
NodeName=n1 NodeHostname=%[3]s NodeAddr=127.0.0.1 Port=%[4]d CPUs=8 RealMemory=2048 Gres=gpu:4 State=UNKNOWN
NodeName=n2 NodeHostname=%[3]s NodeAddr=127.0.0.1 Port=%[5]d CPUs=8 RealMemory=2048 Gres=gpu:4 State=UNKNOWN
PartitionName=gpu Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
`, dir, ctldPort, host, nodePorts["n1"], nodePorts["n2"])
	gres := fmt.Sprintf("AutoDetect=off\nNodeName=n[1-2] Name=gpu File=%s/dev/nvidia[0-3]\n", dir)
	if err := os.WriteFile(c.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gres.conf"), []byte(gres), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ctld = c.startDaemon("slurmctld", c.tools["slurmctld"], "-D", "-i")
	for _, n := range []string{"n1", "n2"} {
		c.slurm[n] = c.startDaemon("slurmd-"+n, c.tools["slurmd"], "-D", "-N", n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if !c.ctld.alive() {
			return errors.New("slurmctld died")
		}
		for n, d := range c.slurm {
			if !d.alive() {
				return fmt.Errorf("slurmd of %s died", n)
			}
		}
		states := c.nodeStates()
		if states["n1"] == "idle" && states["n2"] == "idle" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Slurm nodes are %v after 30 s; want both idle", states)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startDaemon starts a daemon in the foreground, in its own process
// group, with its output in the log folder.
func (c *slurmCluster) startDaemon(name, path string, args ...string) *daemon {
	c.t.Helper()
	d := &daemon{name: name, path: path, args: args, done: make(chan struct{})}
	c.run(d)
	return d
}

func (c *slurmCluster) run(d *daemon) {
	c.t.Helper()
	out, err := os.OpenFile(filepath.Join(c.dir, "log", d.name+".out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	d.cmd = exec.Command(d.path, d.args...)
	d.cmd.Dir = c.dir
	d.cmd.Env = append(os.Environ(), "SLURM_CONF="+c.conf)
	d.cmd.Stdout, d.cmd.Stderr = out, out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		out.Close()
		c.t.Fatalf("start %s: %v", d.name, err)
	}
	d.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); out.Close(); close(done) }(d.cmd, d.done)
}

// restart starts a stopped daemon again.
func (c *slurmCluster) restart(d *daemon) {
	c.t.Helper()
	select {
	case <-d.done:
	default:
		c.t.Fatalf("%s still runs", d.name)
	}
	c.run(d)
}

// stopDaemon ends a daemon by its PID: SIGTERM, then SIGKILL after 5s
// (a slurmd retrying its registration may ignore SIGTERM).
func stopDaemon(d *daemon) {
	if d == nil || d.cmd == nil || d.cmd.Process == nil {
		return
	}
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// kill ends a daemon with SIGKILL: a crash.
func (d *daemon) kill() {
	_ = d.cmd.Process.Kill()
	<-d.done
}

func (d *daemon) alive() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// command runs a Slurm command against the cluster.
func (c *slurmCluster) command(name string, args ...string) (string, error) {
	cmd := exec.Command(c.tools[name], args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.conf)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (c *slurmCluster) mustCommand(name string, args ...string) string {
	c.t.Helper()
	out, err := c.command(name, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// nodeStates reads each node's state as sinfo prints it (idle, drain,
// down*, ...).
func (c *slurmCluster) nodeStates() map[string]string {
	out, err := c.command("sinfo", "-h", "-N", "-o", "%N %T")
	states := make(map[string]string)
	if err != nil {
		return states
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if name, state, ok := strings.Cut(line, " "); ok {
			states[name] = state
		}
	}
	return states
}

// waitNodes waits until the node states satisfy ok, failing early if
// slurmctld dies.
func (c *slurmCluster) waitNodes(timeout time.Duration, ok func(map[string]string) bool) {
	c.t.Helper()
	var states map[string]string
	defer func() {
		if c.t.Failed() {
			c.t.Logf("Slurm nodes are %v:\n%s", states, c.logs())
		}
	}()
	eventually(c.t, timeout, "the Slurm nodes' states", func() bool {
		if !c.ctld.alive() {
			c.t.Fatal("slurmctld died")
		}
		states = c.nodeStates()
		return ok(states)
	})
}

// jobs lists the Slurm jobs that have not ended.
func (c *slurmCluster) liveJobs() []int64 {
	out, err := c.command("squeue", "--json")
	if err != nil {
		return nil
	}
	var q struct {
		Jobs []struct {
			ID    int64  `json:"job_id"`
			State string `json:"job_state"`
		} `json:"jobs"`
	}
	if json.Unmarshal([]byte(out), &q) != nil {
		return nil
	}
	var ids []int64
	for _, j := range q.Jobs {
		switch j.State {
		case "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED":
			ids = append(ids, j.ID)
		}
	}
	return ids
}

// logs is the end of every daemon's log, for failures.
func (c *slurmCluster) logs() string {
	var b strings.Builder
	paths, _ := filepath.Glob(filepath.Join(c.dir, "log", "*"))
	for _, p := range paths {
		data, _ := os.ReadFile(p)
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(p), data)
	}
	return b.String()
}

// stop cancels the cluster's jobs, stops its daemons and kills any job
// process left behind (the steps of a killed slurmd), found by the
// cluster's configuration in their environment.
func (c *slurmCluster) stop() {
	began := time.Now()
	defer func() { c.t.Logf("Slurm cluster stopped in %v", time.Since(began).Round(time.Millisecond)) }()
	if c.ctld != nil && c.ctld.alive() {
		if ids := c.liveJobs(); len(ids) > 0 {
			args := make([]string, len(ids))
			for i, id := range ids {
				args[i] = strconv.FormatInt(id, 10)
			}
			_, _ = c.command("scancel", args...)
			deadline := time.Now().Add(8 * time.Second)
			for len(c.liveJobs()) > 0 && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	for _, d := range c.slurm {
		stopDaemon(d)
	}
	stopDaemon(c.ctld)
	for _, pid := range processesWithEnv("SLURM_CONF=" + c.conf) {
		c.t.Logf("killing process %d left behind by the Slurm cluster", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if c.t.Failed() {
		c.t.Logf("Slurm logs:\n%s", c.logs())
	}
}

// processesWithEnv lists the processes other than this one whose
// environment holds kv.
func processesWithEnv(kv string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, v := range bytes.Split(env, []byte{0}) {
			if string(v) == kv {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// slurmAdminToken is the admin API token of the Slurm tests' servers.
const slurmAdminToken = "slurm-admin"

// startSlurmServer runs gpuportal with the Slurm executor in front of c.
func startSlurmServer(t *testing.T, c *slurmCluster, args ...string) *server {
	t.Helper()
	t.Setenv("SLURM_CONF", c.conf)
	all := append([]string{"--data", t.TempDir(), "--executor", "slurm", "--slurm-run-as", "root",
		"--slurm-poll", "200ms", "--slurm-work-dir", filepath.Join(c.dir, "work"),
		"--slurm-jobcomp", filepath.Join(c.dir, "jobcomp.txt"), "--dev-token", slurmAdminToken}, args...)
	srv := startServer(t, all...)
	waitGPUs(t, srv.URL, 8)
	return srv
}

// jobLog reads a job's output through the API.
func jobLog(t *testing.T, a *api, id int64) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/api/v1/jobs/%d/logs", a.base, id), nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	return b.String()
}

// portalNodes reads the nodes as the portal's admin API shows them.
func portalNodes(t *testing.T, base string) map[string]string {
	t.Helper()
	admin := &api{t: t, base: base, token: slurmAdminToken}
	var nodes []struct{ Name, State string }
	if st := admin.do(http.MethodGet, "/api/v1/nodes", nil, &nodes); st != http.StatusOK {
		t.Fatalf("GET nodes: status %d", st)
	}
	out := make(map[string]string)
	for _, n := range nodes {
		out[n.Name] = n.State
	}
	return out
}

// TestSlurmRunsJobsOnTheChosenGPUs submits jobs in the portal and checks
// that Slurm runs them on the node and GPUs gpuportal's scheduler chose,
// that their output and exit codes come back, and that cancelling in the
// portal ends them in Slurm.
func TestSlurmRunsJobsOnTheChosenGPUs(t *testing.T) {
	c := startSlurm(t)
	srv := startSlurmServer(t, c, "--grace", "1s")
	alice := newAPI(t, srv.URL, "alice", "dev")
	show := `echo "on $SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES slurm=$SLURM_JOB_GPUS job=$GPUPORTAL_JOB_ID"`

	// A one-GPU job takes GPU 0 of a node; a two-GPU job then goes to the
	// same node (best fit), on GPUs 1 and 2.
	holder := submit(t, alice, map[string]any{"name": "holder", "gpus": 1, "command": []string{"sh", "-c", show + "; exec sleep 60"}})
	h := alice.waitState(holder, 30*time.Second, "running")
	eventually(t, 15*time.Second, "the holder's first output", func() bool { return jobLog(t, alice, holder) != "" })
	node, _, _ := strings.Cut(h.Placement[0], ":")

	start := time.Now()
	pair := submit(t, alice, map[string]any{"name": "pair", "gpus": 2, "command": []string{"sh", "-c", show + "; echo bye >&2; exit 3"}})
	p := alice.waitState(pair, 30*time.Second, "failed")
	t.Logf("two-GPU job submitted to failed with exit code 3 in %v", time.Since(start).Round(time.Millisecond))
	if p.ExitCode == nil || *p.ExitCode != 3 || len(p.Placement) != 2 {
		t.Fatalf("job = %+v; want it failed with exit code 3 on two GPUs", p)
	}
	// Where the core put it, Slurm ran it: same node, same GPUs, in
	// CUDA_VISIBLE_DEVICES and in Slurm's own allocation.
	pairNode, _, _ := strings.Cut(p.Placement[0], ":")
	var gpus []string
	for _, pl := range p.Placement {
		n, idx, _ := strings.Cut(pl, ":")
		if n != pairNode {
			t.Fatalf("placement %v spans nodes", p.Placement)
		}
		gpus = append(gpus, idx)
	}
	got := fmt.Sprintf("on %s gpus=%s slurm=%s", pairNode, strings.Join(gpus, ","), strings.Join(gpus, ","))
	if out := jobLog(t, alice, pair); out != fmt.Sprintf("%s job=%d\nbye\n", got, pair) {
		t.Errorf("output %q, want %q", out, got)
	}
	if page := jobPage(t, srv.URL, pair); !strings.Contains(page, got) {
		t.Errorf("the job page lacks the output")
	}
	// Best fit puts it beside the holder, on GPUs 1 and 2: GPUs other
	// than the first ones, which Slurm allocated the same.
	if pairNode != node || strings.Join(gpus, ",") != "1,2" {
		t.Logf("placed on %v, not beside the holder on %s: the scheduler's placement changed", p.Placement, node)
	}
	if out := jobLog(t, alice, holder); out != fmt.Sprintf("on %s gpus=0 slurm=0 job=%d\n", node, holder) {
		t.Errorf("holder's output %q", out)
	}

	// A job's own variables and folder reach Slurm; an administrator's
	// scancel is a cancel, never a failure (nor, for a job that asked
	// for retries, a retry).
	dir := t.TempDir()
	victim := submit(t, alice, map[string]any{"name": "victim", "gpus": 1, "retries": 3, "env": map[string]string{"LR": "0.5"},
		"workdir": dir, "command": []string{"sh", "-c", `echo "LR=$LR pwd=$(pwd)"; exec sleep 60`}})
	alice.waitState(victim, 30*time.Second, "running")
	eventually(t, 15*time.Second, "the victim's output", func() bool { return jobLog(t, alice, victim) != "" })
	if out := jobLog(t, alice, victim); out != fmt.Sprintf("LR=0.5 pwd=%s\n", dir) {
		t.Errorf("the job printed %q", out)
	}
	slurmID := strings.TrimSpace(c.mustCommand("squeue", "--noheader", "--name", fmt.Sprintf("gpuportal-%d", victim), "--format", "%i"))
	c.mustCommand("scancel", slurmID)
	if v := alice.waitState(victim, 15*time.Second, "cancelled", "failed", "queued"); v.State != "cancelled" || v.Failures != 0 ||
		!strings.Contains(v.Reason, "cancelled in Slurm") {
		t.Errorf("after scancel: %s, %d failures, reason %q; want cancelled", v.State, v.Failures, v.Reason)
	}

	// Cancelled in the portal: SIGTERM in Slurm, and the job ends.
	if st := alice.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", holder), nil, nil); st >= 300 {
		t.Fatalf("cancel: status %d", st)
	}
	alice.waitState(holder, 15*time.Second, "cancelled")
	eventually(t, 15*time.Second, "Slurm to end the cancelled job", func() bool { return len(c.liveJobs()) == 0 })
}

// TestSlurmPreemptionAndDrain drains n2 in Slurm and checks that the
// portal stops placing jobs there, then preempts a checkpointing job
// for a newer one: it gets SIGTERM in Slurm, is requeued, and resumes
// from its checkpoint.
func TestSlurmPreemptionAndDrain(t *testing.T) {
	c := startSlurm(t)
	srv := startSlurmServer(t, c, "--thresholds", "6", "--grace", "2s", "--max-retries", "0")
	alice := newAPI(t, srv.URL, "alice", "dev")

	c.mustCommand("scontrol", "update", "nodename=n2", "state=drain", "reason=gpuportal test")
	eventually(t, 10*time.Second, "n2 drained in the portal", func() bool { return portalNodes(t, srv.URL)["n2"] == "drained" })

	// Sixteen steps of a quarter second, saved as it goes; on SIGTERM it
	// says where it stopped and exits.
	long := submit(t, alice, map[string]any{"name": "long", "gpus": 4, "command": []string{"sh", "-c", `
f="$GPUPORTAL_CHECKPOINT_DIR/step"
s=$(cat "$f" 2>/dev/null || echo 0)
echo "start at step $s on $SLURMD_NODENAME"
trap 'echo "stopped at step $s"; exit 0' TERM
while [ "$s" -lt 16 ]; do sleep 0.25; s=$((s+1)); echo "$s" > "$f"; done
echo "finished at step $s"`}})
	j := alice.waitState(long, 30*time.Second, "running")
	if !strings.HasPrefix(j.Placement[0], "n1:") {
		t.Fatalf("job placed on %v; n2 is drained", j.Placement)
	}
	// The GPUs a job holds are busy though Slurm's readings name no job;
	// a drained machine's free GPUs are unavailable, not idle.
	eventually(t, 10*time.Second, "/metrics: n1's 4 GPUs busy, n2's 4 unavailable, none idle", func() bool {
		m := metricsText(t, srv.URL)
		return strings.Contains(m, `gpuportal_gpus{state="busy"} 4`+"\n") &&
			strings.Contains(m, `gpuportal_gpus{state="unavailable"} 4`+"\n") && strings.Contains(m, `gpuportal_gpus{state="idle"} 0`+"\n")
	})
	stepFile := filepath.Join(c.dir, "work", "jobs", strconv.FormatInt(long, 10), "checkpoint", "step")
	eventually(t, 20*time.Second, "the long job's second step", func() bool {
		b, _ := os.ReadFile(stepFile)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n >= 2
	})
	// Past 6 GPU-seconds it drops to the second queue, below new jobs.
	eventually(t, 20*time.Second, "the long job to leave the first queue", func() bool {
		var q struct{ Queue int }
		alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", long), nil, &q)
		return q.Queue > 0
	})
	short := submit(t, alice, map[string]any{"name": "short", "gpus": 2, "command": []string{"sh", "-c", `echo "short on $SLURMD_NODENAME"; sleep 1`}})
	s := alice.waitState(short, 30*time.Second, "succeeded")
	if !strings.HasPrefix(s.Placement[0], "n1:") || jobLog(t, alice, short) != "short on n1\n" {
		t.Errorf("short job ran on %v with output %q; n2 is drained", s.Placement, jobLog(t, alice, short))
	}
	j = alice.waitState(long, 40*time.Second, "succeeded")
	if j.Preemptions < 1 || !strings.HasPrefix(j.Placement[0], "n1:") {
		t.Errorf("long job = %+v; want it preempted at least once, on n1", j)
	}
	out := jobLog(t, alice, long)
	// Slurm adds its own lines when it signals a job, as does the shell
	// whose sleep it kills; gpuportal says where a run resumes from.
	var lines, resumes []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.HasPrefix(l, "gpuportal: run "):
			resumes = append(resumes, l)
		case !strings.HasPrefix(l, "slurmstepd") && l != "Terminated":
			lines = append(lines, l)
		}
	}
	// As on agents (issue 32): the resumed run was told which run wrote
	// its checkpoint, its output says so, and the job's page too.
	if len(resumes) == 0 || !strings.HasPrefix(resumes[0], "gpuportal: run 2 resumes from the checkpoint run 1 wrote at ") {
		t.Errorf("the resumed run's words %q; want run 2 resuming from run 1's checkpoint", resumes)
	}
	var page struct {
		Resume *struct {
			Run          int64      `json:"run"`
			FromRun      int64      `json:"from_run"`
			CheckpointAt *time.Time `json:"checkpoint_at"`
			LostS        float64    `json:"lost_s"`
		} `json:"resume"`
	}
	if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", long), nil, &page); st != http.StatusOK {
		t.Fatalf("GET job: %d", st)
	}
	if r := page.Resume; r == nil || r.Run < 2 || r.FromRun != r.Run-1 || r.CheckpointAt == nil || r.LostS < 0 {
		t.Errorf("the job's resume = %+v; want its last run resumed from the run before's checkpoint", r)
	} else {
		t.Logf("the job's resume: run %d from run %d's checkpoint, %.1f s lost", r.Run, r.FromRun, r.LostS)
	}
	if len(lines) < 4 || lines[0] != "start at step 0 on n1" || !strings.HasPrefix(lines[1], "stopped at step ") ||
		!strings.HasPrefix(lines[2], "start at step ") || lines[len(lines)-1] != "finished at step 16" {
		t.Errorf("output of the preempted job:\n%s\nwant a start, a stop, a resume past step 0 and the end", out)
	}
	if len(lines) >= 3 {
		stopped := strings.TrimPrefix(lines[1], "stopped at step ")
		if n, _ := strconv.Atoi(stopped); n < 2 || lines[2] != "start at step "+stopped+" on n1" {
			t.Errorf("stopped at step %s and resumed with %q; want a resume where it stopped, past step 2", stopped, lines[2])
		}
	}

	c.mustCommand("scontrol", "update", "nodename=n2", "state=resume")
	eventually(t, 10*time.Second, "n2 back in the portal", func() bool { return portalNodes(t, srv.URL)["n2"] == "ready" })
}

// TestSlurmKilledSlurmdRequeues kills the slurmd running a job: Slurm
// stops hearing from the node, gpuportal loses it, and after the
// heartbeat timeout requeues the job, which finishes on the other node.
// The server's grace is the fault tests' 1 s: the requeue comes twice the
// timeout and the grace after the node was last heard, not 10 s later.
func TestSlurmKilledSlurmdRequeues(t *testing.T) {
	c := startSlurm(t)
	srv := startSlurmServer(t, c, "--heartbeat-timeout", faultTimeout, "--grace", faultGrace, "--max-retries", "0")
	alice := newAPI(t, srv.URL, "alice", "dev")

	// It marks its first run in its folder, not in its checkpoint
	// folder: the second run starts from scratch, and says so.
	id := submit(t, alice, map[string]any{"name": "survivor", "gpus": 2, "command": []string{"sh", "-c", `
if [ -e first ]; then echo "second run on $SLURMD_NODENAME"; exit 0; fi
touch first
echo "first run on $SLURMD_NODENAME"
exec sleep 120`}})
	j := alice.waitState(id, 30*time.Second, "running")
	first, _, _ := strings.Cut(j.Placement[0], ":")
	eventually(t, 15*time.Second, "the first run's output", func() bool { return jobLog(t, alice, id) != "" })

	c.slurm[first].kill()
	killed := time.Now()
	j = alice.waitState(id, 60*time.Second, "succeeded")
	t.Logf("requeued and finished %v after slurmd was killed", time.Since(killed).Round(time.Millisecond))
	second, _, _ := strings.Cut(j.Placement[0], ":")
	if second == first {
		t.Errorf("job finished on %s, whose slurmd was killed", second)
	}
	// The run that finished is run 2, or a later one where a start on the
	// lost node was tried first.
	scratch := regexp.MustCompile(`\ngpuportal: run [2-9] starts from scratch: its checkpoint folder is empty\nsecond run on ` + second + `\n$`)
	if out := jobLog(t, alice, id); !strings.HasPrefix(out, "first run on "+first+"\n") || !scratch.MatchString(out) {
		t.Errorf("output %q; want the first run on %s and the second, from scratch, on %s", out, first, second)
	}
	// The job's page says so too (issue 32), as for the agents' runs.
	var page struct {
		Resume *struct {
			Run          int64      `json:"run"`
			CheckpointAt *time.Time `json:"checkpoint_at"`
		} `json:"resume"`
	}
	if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &page); st != http.StatusOK || page.Resume == nil ||
		page.Resume.Run < 2 || page.Resume.CheckpointAt != nil {
		t.Errorf("the job's resume: %d %+v; want its last run from scratch (no checkpoint_at)", st, page.Resume)
	} else if h := jobHistory(t, alice, id); !slices.ContainsFunc(h, func(e historyEntry) bool {
		return strings.HasPrefix(e.Detail, fmt.Sprintf("run %d started from scratch", page.Resume.Run))
	}) {
		t.Errorf("history %+v; want a line saying run %d started from scratch", h, page.Resume.Run)
	}
	if out := srv.output(); !strings.Contains(out, "requeued: node "+first+" lost") {
		t.Errorf("the server did not requeue the job as lost with %s", first)
	}

	// slurmd comes back: Slurm ends the orphaned run, and the node
	// returns to the portal.
	c.restart(c.slurm[first])
	waitGPUs(t, srv.URL, 8)
	eventually(t, 20*time.Second, "the orphaned run to end", func() bool { return len(c.liveJobs()) == 0 })
}
