package agent

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// Container jobs (docs/agents.md, "Container jobs"). A job that names an
// image runs in a container of the machine's runtime, Podman (the
// reference) or Docker, through the same code: as the account the job
// runs as (its user, primary and supplementary groups), with only the
// job's GPUs (CDI devices nvidia.com/gpu=INDEX from the NVIDIA container
// toolkit's spec), its folder mounted at the same path and used as its
// working folder, the job's environment and the gate's socket. The
// container gets its own process namespace with an init that forwards
// signals, its own IPC namespace with a /dev/shm the size of the job's
// memory (NCCL between its GPUs, data loaders), and a private network,
// unless the operator gives it the machine's (ContainerConfig.Network): a
// session's port is then published on the machine's loopback only.
//
// The container is named after the machine, job and run
// (gpuportal-NODE-JOB-RUN) and labelled with the agent (gpuportal.agent =
// NODE@WORKDIR), so an agent that restarts stops the containers an
// earlier process of it left (StopStrayContainers). Stopping a run sends
// the container SIGTERM, then SIGKILL after the grace period; the
// watchdog knows the container's init, so a frozen or dead agent's
// containers are stopped as its commands are. Where cgroups are on, the
// container's cgroup is made under the job's (--cgroup-parent), so its
// allocation, resizing, profiling and usage work as for a command.

// Runtimes are the container runtimes the agent drives.
var Runtimes = []string{"podman", "docker"}

// ContainerConfig says how the agent runs container jobs.
type ContainerConfig struct {
	// Runtime is the runtime's program: podman or docker, or a path to
	// one (its base name says which).
	Runtime string
	// CDI exposes each job's GPUs to it as CDI devices
	// nvidia.com/gpu=INDEX; without it the container gets no GPU device
	// (simulated GPUs).
	CDI bool
	// Network is the containers' network: private (the default) or the
	// machine's (agent --container-network host).
	Network ContainerNetwork
	// Srun is a static srun (FindContainerSrun) mounted read-only into
	// every container at ContainerSrunPath; "": containers get none.
	Srun string
}

// ContainerNetwork is the network container jobs get (agent
// --container-network): a flag.Value.
type ContainerNetwork string

const (
	// NetworkPrivate, the default (""), gives each container a network
	// namespace of its own, on the runtime's bridge: it reaches out, but
	// not the machine's loopback services (the portal, a database, other
	// jobs' sessions), and no port of it is reachable but a session's,
	// published on the machine's loopback.
	NetworkPrivate ContainerNetwork = "private"
	// NetworkHost shares the machine's network, as a command job does.
	NetworkHost ContainerNetwork = "host"
)

// String is the network's name; "" is private.
func (n ContainerNetwork) String() string {
	if n == "" {
		return string(NetworkPrivate)
	}
	return string(n)
}

// Set reads the value of --container-network.
func (n *ContainerNetwork) Set(v string) error {
	switch ContainerNetwork(v) {
	case NetworkPrivate, NetworkHost:
		*n = ContainerNetwork(v)
		return nil
	}
	return fmt.Errorf("%q: want %s (the default) or %s", v, NetworkPrivate, NetworkHost)
}

// minShmMiB is the least /dev/shm a container gets: NCCL's shared-memory
// transport between the GPUs of one machine needs more than the
// runtimes' 64 MiB.
const minShmMiB = 1024

// kind is "podman" or "docker".
func (c ContainerConfig) kind() string {
	if strings.HasPrefix(filepath.Base(c.Runtime), "docker") {
		return "docker"
	}
	return "podman"
}

// CheckContainerRuntime checks the --container-runtime value and that the
// program runs (its version).
func CheckContainerRuntime(ctx context.Context, runtime string) (string, error) {
	if base := filepath.Base(runtime); !strings.HasPrefix(base, "podman") && !strings.HasPrefix(base, "docker") {
		return "", fmt.Errorf("%q: want podman or docker (or a path to one)", runtime)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, runtime, "version", "--format", "{{.Client.Version}}").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s version: %w: %s", runtime, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// CDISpecDirs are where the NVIDIA container toolkit writes the CDI spec
// of the machine's GPUs (nvidia-ctk cdi generate).
var CDISpecDirs = []string{"/etc/cdi", "/var/run/cdi"}

// HasNvidiaCDI reports whether a CDI spec of kind nvidia.com/gpu is in
// one of dirs.
func HasNvidiaCDI(dirs []string) bool {
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if ext := filepath.Ext(e.Name()); ext != ".yaml" && ext != ".json" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err == nil && bytes.Contains(b, []byte("nvidia.com/gpu")) {
				return true
			}
		}
	}
	return false
}

// containerRun is what containerArgs needs to know of one run.
type containerRun struct {
	Kind  string // podman or docker
	Name  string // the container's name
	Agent string // the gpuportal.agent label
	Image string
	Argv  []string
	// UID, GID and Groups are the account the job runs as; Account its
	// name, for the container's /etc/passwd (podman).
	UID, GID int
	Groups   []uint32
	Account  string
	// Rootless: the runtime runs as the agent's user, not root: podman
	// maps that user into the container (--userns=keep-id).
	Rootless bool
	JobDir   string // mounted at the same path
	Workdir  string // the folder the command starts in (the job's, or the one it asked for)
	Gate     string // the gate's socket, mounted at the same path; "" when none
	// Env are the job's variables: Values go on the command line, Names
	// come from the runtime client's own environment, so that secrets
	// (the gate's token, --pass-env variables) never show in ps.
	Values []string
	Names  []string
	// CDI lists the CDI devices (nvidia.com/gpu=INDEX) the job gets.
	CDI []string
	// CgroupParent is the job's cgroup, relative to the hierarchy's root
	// ("" without cgroups).
	CgroupParent string
	Grace        time.Duration
	// Srun is the machine's static srun, mounted at ContainerSrunPath; ""
	// for none.
	Srun string
	// Network is the container's network; Publish a session's port,
	// published on the machine's loopback when the network is private (0:
	// none).
	Network ContainerNetwork
	Publish int
	// ShmMiB is the size of its /dev/shm.
	ShmMiB int64
}

// containerArgs is the runtime's command line for one run: global flags,
// "run", its flags, the image and the job's argv.
func containerArgs(r containerRun) []string {
	var args []string
	if r.Kind == "podman" && r.CgroupParent != "" {
		// A cgroup path, not a systemd slice.
		args = append(args, "--cgroup-manager=cgroupfs")
	}
	network := "--network=private" // podman: a bridge as root, slirp4netns or pasta rootless
	switch {
	case r.Network == NetworkHost:
		network = "--network=host"
	case r.Kind == "docker":
		network = "--network=bridge"
	}
	args = append(args, "run", "--rm", "--init",
		"--name", r.Name,
		"--label", "gpuportal.agent="+r.Agent,
		network, "--ipc=private", "--shm-size", fmt.Sprintf("%dm", max(r.ShmMiB, minShmMiB)),
		"--user", fmt.Sprintf("%d:%d", r.UID, r.GID),
		"--stop-timeout", strconv.Itoa(max(int(r.Grace.Round(time.Second)/time.Second), 1)),
	)
	if r.Publish > 0 && r.Network != NetworkHost {
		args = append(args, "--publish", fmt.Sprintf("127.0.0.1:%d:%d", r.Publish, r.Publish))
	}
	for _, g := range r.Groups {
		if int(g) != r.GID {
			args = append(args, "--group-add", strconv.FormatUint(uint64(g), 10))
		}
	}
	if r.Kind == "podman" {
		if r.Account != "" {
			args = append(args, "--passwd-entry", fmt.Sprintf("%s:*:%d:%d::%s:/bin/sh", r.Account, r.UID, r.GID, r.JobDir))
		}
		if r.Rootless {
			args = append(args, "--userns=keep-id")
		}
	}
	if r.CgroupParent != "" {
		args = append(args, "--cgroup-parent", r.CgroupParent)
	}
	args = append(args, "--volume", r.JobDir+":"+r.JobDir, "--workdir", cmp.Or(r.Workdir, r.JobDir))
	if r.Gate != "" {
		args = append(args, "--volume", r.Gate+":"+r.Gate)
	}
	if r.Srun != "" {
		args = append(args, "--volume", r.Srun+":"+ContainerSrunPath+":ro")
	}
	for _, d := range r.CDI {
		args = append(args, "--device", d)
	}
	for _, kv := range r.Values {
		args = append(args, "--env", kv)
	}
	for _, n := range r.Names {
		args = append(args, "--env", n)
	}
	args = append(args, r.Image)
	return append(args, r.Argv...)
}

// containerName is the name of run ref's container on node: letters,
// digits, '_', '.' and '-' only.
func containerName(node string, ref job.RunRef) string {
	return fmt.Sprintf("gpuportal-%s-%d-%d", nameUnsafe.ReplaceAllString(node, "_"), ref.Job, ref.Run)
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// agentLabel is the value of the gpuportal.agent label of this agent's
// containers.
func (a *Local) agentLabel() string { return a.cfg.Name + "@" + a.cfg.WorkDir }

// clientOwn are variables the runtime's client reads itself: a job's
// values of them go on its command line, never into the client's
// environment. None is a secret.
func clientOwn(name string) bool {
	switch name {
	case "HOME", "USER", "LOGNAME", "PATH", "TMPDIR", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ":
		return true
	}
	for _, p := range []string{"LC_", "XDG_", "CONTAINERS_", "DOCKER_", "REGISTRY_", "BUILDAH_", "STORAGE_", "CONTAINER_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// imageOwn are variables a container takes from its image unless the job
// set them itself: the machine's would point at folders the image may not
// have.
func imageOwn(name string) bool { return name == "PATH" || name == "TMPDIR" || name == "SHELL" }

// containerEnv splits a job's environment for the container: values for
// the command line, names to pass through, and the client's environment
// (the agent's own with the passed variables set). own are the names the
// job set itself (job.Spec.Env), which the image's never replace.
func containerEnv(jobEnv, agentEnv []string, own map[string]bool) (values, names, client []string) {
	set := map[string]string{}
	for _, kv := range jobEnv {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case imageOwn(name) && !own[name]:
		case clientOwn(name):
			values = append(values, kv)
		default:
			if _, dup := set[name]; !dup {
				names = append(names, name)
			}
			set[name] = kv // the last value wins, as for a command
		}
	}
	for _, kv := range agentEnv {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := set[name]; !ok {
			client = append(client, kv)
		}
	}
	for _, n := range names {
		client = append(client, set[n])
	}
	return values, names, client
}

// cudaDevices is CUDA_VISIBLE_DEVICES for a job of n GPUs in a container
// that sees only them: they are 0 to n-1 there.
func cudaDevices(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return strings.Join(s, ",")
}

// startContainer runs the job's command in its image, as user ra (nil:
// the agent's own user), with extraEnv (the gate's) added. The runtime's
// client runs in its own process group; the container's init, once it
// runs, is told to the watchdog and kept in r (containerStarted).
func (a *Local) startContainer(s job.Spec, r *run, ra *runAs, log *os.File, extraEnv []string, cgroupParent string) (wait func() (int, string), stop func(), err error) {
	cc := a.cfg.Containers
	if cc == nil {
		fmt.Fprintf(log, "gpuportal: this machine runs no containers: cannot run image %s\n", s.Image)
		return nil, nil, fmt.Errorf("job %d names image %s, and the agent of %s runs no containers (start it with --container-runtime podman)", s.JobID, s.Image, a.cfg.Name)
	}
	if err := job.CheckImage(s.Image); err != nil {
		// Checked at submission; never an option to the runtime.
		return nil, nil, fmt.Errorf("job %d: image %w", s.JobID, err)
	}
	ref := job.RunRef{Job: s.JobID, Run: s.Run}
	cr := containerRun{
		Kind: cc.kind(), Name: containerName(a.cfg.Name, ref), Agent: a.agentLabel(),
		Image: s.Image, Argv: s.Command, JobDir: a.jobDir(s.JobID), Workdir: jobWorkdir(a.jobDir(s.JobID), s.Dir),
		CgroupParent: cgroupParent, Grace: a.cfg.Grace, Srun: cc.Srun,
		UID: os.Geteuid(), GID: os.Getegid(),
		Network: cc.Network, Publish: r.sessionPort, ShmMiB: a.jobMemMiB(s),
	}
	if ra != nil {
		cr.UID, cr.GID, cr.Groups, cr.Account = ra.uid, ra.gid, ra.groups, ra.name
	} else if gs, err := os.Getgroups(); err == nil {
		for _, g := range gs {
			cr.Groups = append(cr.Groups, uint32(g))
		}
	}
	cr.Rootless = cr.Kind == "podman" && a.euid != 0
	if a.gate != nil && s.Sharing != nil {
		cr.Gate = a.gate.Path()
	}
	if cc.CDI {
		for _, g := range s.GPUs {
			cr.CDI = append(cr.CDI, "nvidia.com/gpu="+strconv.Itoa(g))
		}
	}
	extraEnv = append([]string{"GPUPORTAL_NODE=" + a.cfg.Name}, extraEnv...)
	own := map[string]bool{}
	for _, kv := range s.Env {
		name, _, _ := strings.Cut(kv, "=")
		own[name] = true
	}
	env := append(jobEnv(os.Environ(), s, a.cfg.Name, a.CheckpointDir(s.JobID), ra, a.cfg.PassEnv), extraEnv...)
	for i, kv := range env {
		switch {
		case strings.HasPrefix(kv, "CUDA_VISIBLE_DEVICES=") && cc.CDI:
			env[i] = "CUDA_VISIBLE_DEVICES=" + cudaDevices(len(s.GPUs))
		case strings.HasPrefix(kv, "HOME=") && (ra != nil || !own["HOME"]):
			// The account's home is not in the container: its folder is.
			env[i] = "HOME=" + cr.JobDir
		}
	}
	var clientEnv []string
	cr.Values, cr.Names, clientEnv = containerEnv(env, os.Environ(), own)
	cmd := exec.Command(cc.Runtime, containerArgs(cr)...)
	cmd.Env = clientEnv
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(log, "gpuportal: cannot start container runtime %s: %v\n", cc.Runtime, err)
		return nil, nil, fmt.Errorf("run image %s with %s: %w", s.Image, cc.Runtime, err)
	}
	exited := make(chan struct{})
	found := make(chan struct{})
	go func() {
		defer close(found)
		a.watchContainer(cr.Name, r, exited)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			go func() {
				a.signalContainer(r, cr.Name, "TERM")
				select {
				case <-exited:
					return
				case <-time.After(a.cfg.Grace):
				}
				a.signalContainer(r, cr.Name, "KILL")
				a.mu.Lock()
				running := r.init > 0
				a.mu.Unlock()
				if !running {
					// Still not started (an image that unpacks or pulls):
					// the client goes, and wait removes what it made.
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				}
			}()
		})
	}
	wait = func() (int, string) {
		err := cmd.Wait()
		close(exited)
		<-found
		// The client may have died before the container: it goes too.
		a.removeContainer(cr.Name)
		a.mu.Lock()
		init := r.init
		a.mu.Unlock()
		if init > 0 {
			a.cfg.Watchdog.Remove(init)
		}
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, ""
		case errors.As(err, &ee):
			code := ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return -1, "the container runtime's client was " + job.KilledBy(ws.Signal())
			}
			if code == 125 {
				return code, fmt.Sprintf("%s could not run image %s (exit 125): see the job's output", filepath.Base(cc.Runtime), s.Image)
			}
			return code, ""
		default:
			return -1, err.Error()
		}
	}
	return wait, stop, nil
}

// jobMemMiB is the host memory of job s: its allocation, else its GPUs'
// share of the machine's.
func (a *Local) jobMemMiB(s job.Spec) int64 {
	if s.Resources != nil && s.Resources.MemMiB > 0 {
		return s.Resources.MemMiB
	}
	if n := len(a.cfg.Backend.Devices()); n > 0 {
		return a.cfg.MemMiB * int64(len(s.GPUs)) / int64(n)
	}
	return 0
}

// sessionHost is the address a session's server listens on: the
// machine's loopback, or in a container with a network of its own, every
// interface of the container (its port is published on the machine's
// loopback only).
func (a *Local) sessionHost(s job.Spec) string {
	if s.Image != "" && a.cfg.Containers != nil && a.cfg.Containers.Network != NetworkHost {
		return "0.0.0.0"
	}
	return "127.0.0.1"
}

// watchContainer waits until the container runs and keeps its init's
// process ID and process namespace in r, telling the watchdog of it;
// it gives up when the runtime's client exits first.
func (a *Local) watchContainer(name string, r *run, exited <-chan struct{}) {
	cc := a.cfg.Containers
	for delay := 50 * time.Millisecond; ; delay = min(delay*2, time.Second) {
		select {
		case <-exited:
			return
		case <-time.After(delay):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, cc.Runtime, "inspect", "--format", "{{.State.Pid}}", name).Output()
		cancel()
		if err != nil {
			continue // not created yet (the image may be unpacking)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil || pid <= 0 {
			continue
		}
		ns, err := pidNamespace(pid)
		if err != nil {
			continue
		}
		a.mu.Lock()
		r.init, r.pidns = pid, ns
		stopping := r.stopping
		a.mu.Unlock()
		a.cfg.Watchdog.Add(pid, a.cfg.Grace)
		if stopping {
			// Asked to stop before the container ran: ask again.
			a.signalContainer(r, name, "TERM")
		}
		return
	}
}

// signalContainer sends the container SIGTERM or SIGKILL through its
// runtime, or straight to its init's process group when the runtime
// fails (its init forwards the signal; SIGKILL to it ends every process
// of the container).
func (a *Local) signalContainer(r *run, name, sig string) {
	a.mu.Lock()
	r.stopping = true
	init := r.init
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, a.cfg.Containers.Runtime, "kill", "--signal", sig, name).CombinedOutput()
	if err == nil {
		return
	}
	if init > 0 {
		s := syscall.SIGTERM
		if sig == "KILL" {
			s = syscall.SIGKILL
		}
		_ = syscall.Kill(-init, s)
		return
	}
	a.cfg.Logger.Debug("signal container", "container", name, "signal", sig, "err", err, "output", strings.TrimSpace(string(out)))
}

// removeContainer removes a container at once, whatever its state.
func (a *Local) removeContainer(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"rm", "--force", name}
	if a.cfg.Containers.kind() == "podman" {
		args = []string{"rm", "--force", "--ignore", name} // docker has no --ignore, and says "No such container"
	}
	out, err := exec.CommandContext(ctx, a.cfg.Containers.Runtime, args...).CombinedOutput()
	if err != nil && !bytes.Contains(bytes.ToLower(out), []byte("no such container")) {
		a.cfg.Logger.Warn("remove a job's container", "container", name, "err", err, "output", strings.TrimSpace(string(out)))
	}
}

// StopStrayContainers stops and removes the containers that an earlier
// process of this agent left running (its label), so that no run it no
// longer tracks goes on: SIGTERM, the grace period, then SIGKILL. It
// returns their names.
func (a *Local) StopStrayContainers(ctx context.Context) ([]string, error) {
	cc := a.cfg.Containers
	if cc == nil {
		return nil, nil
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(lctx, cc.Runtime, "ps", "--all", "--filter", "label=gpuportal.agent="+a.agentLabel(), "--format", "{{.Names}}").Output()
	if err != nil {
		return nil, fmt.Errorf("list this agent's containers with %s: %w", cc.Runtime, err)
	}
	names := strings.Fields(string(out))
	a.mu.Lock()
	for _, r := range a.runs {
		names = slices.DeleteFunc(names, func(n string) bool { return n == r.container })
	}
	a.mu.Unlock()
	if len(names) == 0 {
		return nil, nil
	}
	a.cfg.Logger.Warn("stopping containers an earlier process of this agent left", "containers", names)
	grace := strconv.Itoa(max(int(a.cfg.Grace.Round(time.Second)/time.Second), 1))
	sctx, scancel := context.WithTimeout(ctx, a.cfg.Grace+30*time.Second)
	defer scancel()
	if out, err := exec.CommandContext(sctx, cc.Runtime, append([]string{"stop", "--time", grace}, names...)...).CombinedOutput(); err != nil {
		a.cfg.Logger.Debug("stop stray containers", "err", err, "output", strings.TrimSpace(string(out)))
	}
	var errs []error
	for _, n := range names {
		out, err := exec.CommandContext(ctx, cc.Runtime, "rm", "--force", n).CombinedOutput()
		if err != nil && !bytes.Contains(bytes.ToLower(out), []byte("no such container")) {
			errs = append(errs, fmt.Errorf("remove stray container %s: %w: %s", n, err, strings.TrimSpace(string(out))))
		}
	}
	return names, errors.Join(errs...)
}

// pidNamespace is the inode of process pid's PID namespace.
func pidNamespace(pid int) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join("/proc", strconv.Itoa(pid), "ns", "pid"), &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// nsMembers lists the processes in PID namespace ns.
func nsMembers(ns uint64) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if n, err := pidNamespace(pid); err == nil && n == ns {
			out = append(out, pid)
		}
	}
	return out, nil
}
