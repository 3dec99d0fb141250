package slurm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/job"
)

// Registry is the part of the engine that Slurm's nodes join and report
// to. *engine.Engine implements it.
type Registry interface {
	AddNode(ctx context.Context, n engine.Node) error
	RemoveNode(ctx context.Context, name string) error
	MirrorDraining(name string, on bool) error
	NodeStatuses() []engine.NodeStatus
	Exits() chan<- job.Exit
}

// Config sets up an Executor.
type Config struct {
	Client   Client
	Registry Registry
	Logger   *slog.Logger
	// WorkDir holds each job's folder, WorkDir/jobs/ID, with its output
	// (output.log) and its checkpoint folder; the server and every node
	// must see it at the same path (a shared file system).
	WorkDir string
	// Partition limits gpuportal to one partition's nodes and submits
	// there; empty: every node, and Slurm's default partition.
	Partition string
	// RunAs is the user jobs run as (sbatch --uid and --gid, when the
	// server runs as root). Empty: the server's own user, except that
	// command jobs never run as root unless RunAs says "root".
	// agent.RunAsOwner ("owner") runs each job as its owner's Unix account
	// (job.Spec.Account), looked up on the server, which must see the
	// cluster's accounts (the same LDAP, say); the server runs as root.
	RunAs string
	// MinUID is the lowest user ID RunAsOwner runs a job as; root and the
	// system's accounts below it are refused. 0: agent.DefaultMinUID.
	MinUID int
	// JobPrefix names gpuportal's Slurm jobs: PREFIX-ID for gpuportal job
	// ID. Default "gpuportal"; give each server sharing a cluster its own.
	JobPrefix string
	// Poll is the time between two readings of Slurm's state; default 1s.
	Poll time.Duration
	// Grace is the time between SIGTERM and the final cancel of a job
	// being stopped; default 10s.
	Grace time.Duration
	// StartTimeout bounds the wait of a released job for Slurm to start
	// it; then it is cancelled and its run fails. Default 30s.
	StartTimeout time.Duration
	// GPUMemory is the memory of the GPUs, which Slurm does not know.
	GPUMemory GPUMemory
	// JobCompFile is Slurm's job completion log (JobCompType=
	// jobcomp/filetxt, JobCompLoc), read for jobs that squeue no longer
	// lists; empty: none. JobCompZone is the time zone of its times
	// (slurmctld's); default local.
	JobCompFile string
	JobCompZone *time.Location
	// Path is the PATH of jobs; default the server's.
	Path string
	// Monitors finds the monitor-only gpuportal agent of a node, whose
	// GPU samples become the node's (see monitor.go); nil: none.
	Monitors engine.Monitors
	Now      func() time.Time
}

// Executor makes the nodes of a Slurm cluster engine nodes and runs the
// engine's jobs there as Slurm batch jobs. Create it with New, then Run.
type Executor struct {
	cfg    Config
	log    *slog.Logger
	script string // the batch script every job runs through
	euid   int
	runAs  *runAs // nil: the server's own user

	mu      sync.Mutex
	ctx     context.Context  // Run's, for work that outlives a call
	nodes   map[string]*node // the nodes in scope at the last reading
	runs    map[int64]*run   // by Slurm job ID, until they end
	drained map[string]bool  // nodes gpuportal drains because Slurm does
	adopted bool             // the first reading adopted running jobs
	failing time.Time        // since when reading Slurm fails
}

// run is one run of a gpuportal job: one Slurm job.
type run struct {
	slurmID int64
	name    string // the Slurm job's name
	jobID   int64
	run     int64 // the gpuportal run's number (job.RunRef)
	node    string
	gpus    []int // the GPUs gpuportal chose
	// claimed are the GPUs counted in the Slurm job's gres: its GPUs that
	// no other run of gpuportal's held when it started.
	claimed  []int
	cpus     int
	memMiB   int64
	recorded time.Time // when Slurm had it
	released time.Time // zero while held
	running  bool      // seen started
	stopping bool      // asked to stop
	// failure says why gpuportal cancelled it on its own.
	failure    string
	warnedGPUs bool
	// resume is what the run found in its checkpoint folder as it was
	// submitted; zero (Run 0) for a run adopted from an earlier server.
	resume job.Resume
}

// runAs is the user a job runs as.
type runAs struct {
	name     string
	uid, gid int
	groups   []uint32 // supplementary groups
	home     string
}

// user is ra as the agent package checks accounts.
func (ra *runAs) user() *agent.User {
	return &agent.User{Name: ra.name, UID: ra.uid, GID: ra.gid, Groups: ra.groups, Home: ra.home}
}

// New returns an executor for cfg. It writes the batch script into the
// work folder.
func New(cfg Config) (*Executor, error) {
	if cfg.Client == nil || cfg.Registry == nil {
		return nil, errors.New("slurm executor: a client and a registry are required")
	}
	if cfg.WorkDir == "" {
		return nil, errors.New("slurm executor: no work folder")
	}
	dir, err := filepath.Abs(cfg.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("slurm executor: work folder: %w", err)
	}
	cfg.WorkDir = dir
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.JobPrefix == "" {
		cfg.JobPrefix = "gpuportal"
	}
	if strings.ContainsAny(cfg.JobPrefix, " \t\n,=") {
		return nil, fmt.Errorf("slurm executor: job prefix %q: no spaces, commas or '='", cfg.JobPrefix)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.GPUMemory.DefaultMiB <= 0 {
		cfg.GPUMemory.DefaultMiB = defaultGPUMemMiB
	}
	if cfg.JobCompZone == nil {
		cfg.JobCompZone = time.Local
	}
	if cfg.Path == "" {
		cfg.Path = os.Getenv("PATH")
		if cfg.Path == "" {
			cfg.Path = "/usr/local/bin:/usr/bin:/bin"
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	e := &Executor{
		cfg: cfg, log: cfg.Logger, euid: os.Geteuid(), ctx: context.Background(),
		nodes: make(map[string]*node), runs: make(map[int64]*run), drained: make(map[string]bool),
	}
	if cfg.MinUID <= 0 {
		cfg.MinUID = agent.DefaultMinUID
		e.cfg.MinUID = cfg.MinUID
	}
	if e.runAs, err = lookupRunAs(cfg.RunAs, e.euid); err != nil {
		return nil, fmt.Errorf("slurm executor: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "jobs"), 0o755); err != nil {
		return nil, fmt.Errorf("slurm executor: work folder: %w", err)
	}
	if runsAsOthers(cfg.RunAs, e.runAs, e.euid) {
		// Slurm opens output.log, and the job its checkpoint folder, as
		// the job's account: it passes through the work folder to its
		// own job's folder and lists nothing, as on agents.
		var u *agent.User // owner: any account
		if e.runAs != nil {
			u = e.runAs.user()
		}
		if err := agent.OpenJobsDir(dir, u, "--slurm-work-dir"); err != nil {
			return nil, fmt.Errorf("slurm executor: %w", err)
		}
	}
	e.script = filepath.Join(dir, "gpuportal-job.sh")
	if err := writeScript(e.script); err != nil {
		return nil, fmt.Errorf("slurm executor: %w", err)
	}
	return e, nil
}

// Run reads Slurm's state every Poll until ctx ends: it adds, drains and
// removes nodes as Slurm reports them, reports the end of each run to the
// engine, and cancels runs that Slurm did not start in time. Jobs keep
// running in Slurm when it returns; the next Run adopts them.
func (e *Executor) Run(ctx context.Context) {
	e.mu.Lock()
	e.ctx = ctx
	e.mu.Unlock()
	tick := time.NewTicker(e.cfg.Poll)
	defer tick.Stop()
	for {
		e.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Sync reads Slurm's state once and acts on it, as Run does every Poll.
func (e *Executor) Sync(ctx context.Context) {
	readAt := e.cfg.Now()
	nodes, err := e.cfg.Client.Nodes(ctx)
	var jobs []Job
	if err == nil {
		jobs, err = e.cfg.Client.Jobs(ctx)
	}
	if err != nil {
		if ctx.Err() == nil {
			e.readFailed(err)
		}
		return
	}
	e.mu.Lock()
	if !e.failing.IsZero() {
		e.log.Info("reading Slurm works again", "after", e.cfg.Now().Sub(e.failing).Round(time.Second))
		e.failing = time.Time{}
	}
	adopt := !e.adopted
	e.adopted = true
	e.mu.Unlock()
	if adopt {
		e.adopt(ctx, jobs)
	}
	e.syncNodes(ctx, nodes)
	e.syncJobs(ctx, jobs, readAt)
}

// readFailed logs that Slurm could not be read: the first time, then once
// a minute. Nodes and runs stay as they are meanwhile: jobs in Slurm keep
// running while its controller is away.
func (e *Executor) readFailed(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.cfg.Now()
	if e.failing.IsZero() {
		e.failing = now
		e.log.Error("cannot read Slurm's state; nodes and jobs stay as they were", "err", err)
		return
	}
	if since := now.Sub(e.failing); since%time.Minute < e.cfg.Poll {
		e.log.Error("still cannot read Slurm's state", "for", since.Round(time.Second), "err", err)
	}
}

// adopt takes over the Slurm jobs of an earlier server: running ones are
// tracked again (the engine adopts them when their node joins), and held
// ones, submitted but never released, are cancelled.
func (e *Executor) adopt(ctx context.Context, jobs []Job) {
	now := e.cfg.Now()
	var stale []int64
	e.mu.Lock()
	for _, j := range jobs {
		jobID, ok := e.jobIDOf(j.Name)
		if !ok || j.Finished() {
			continue
		}
		if j.Held() {
			stale = append(stale, j.ID)
			continue
		}
		r := &run{slurmID: j.ID, name: j.Name, jobID: jobID, run: commentRun(j.Comment), node: j.Nodes, gpus: commentGPUs(j.Comment),
			cpus: j.CPUs, memMiB: j.MemMiB, recorded: now, released: now, running: j.Started()}
		if r.node == "" {
			r.node = j.RequiredNodes
		}
		r.claimed = r.gpus
		e.runs[j.ID] = r
		e.log.Info("adopted a Slurm job", "job", jobID, "slurm_job", j.ID, "node", r.node, "state", j.State)
	}
	e.mu.Unlock()
	for _, id := range stale {
		e.log.Warn("cancelling a held Slurm job left by an earlier server", "slurm_job", id)
		if err := e.cfg.Client.Cancel(ctx, id); err != nil {
			e.log.Warn("cancel a held Slurm job", "slurm_job", id, "err", err)
		}
	}
}

// syncNodes adds the nodes Slurm runs, removes those it lost, and drains
// in gpuportal those Slurm drains.
func (e *Executor) syncNodes(ctx context.Context, nodes []Node) {
	var add []*node
	var remove []string
	draining := make(map[string]bool)
	e.mu.Lock()
	seen := make(map[string]bool)
	for _, sn := range nodes {
		if !sn.InPartition(e.cfg.Partition) || len(sn.GPUs) == 0 {
			continue
		}
		seen[sn.Name] = true
		n := e.nodes[sn.Name]
		if n == nil {
			n = &node{e: e, name: sn.Name}
			e.nodes[sn.Name] = n
		}
		n.update(sn, e.cfg.GPUMemory)
		switch {
		case sn.Lost() && n.registered:
			e.log.Warn("Slurm node lost: its jobs are requeued unless it returns in time",
				"node", sn.Name, "state", sn.State, "flags", sn.Flags, "reason", sn.Reason)
			n.registered = false
			remove = append(remove, sn.Name)
		case !sn.Lost() && !n.registered:
			n.registered = true
			add = append(add, n)
		}
		if n.registered {
			draining[sn.Name] = sn.Draining()
		}
	}
	for name, n := range e.nodes {
		if !seen[name] {
			if n.registered {
				e.log.Warn("node left Slurm or the partition", "node", name)
				remove = append(remove, name)
			}
			delete(e.nodes, name)
		}
	}
	e.mu.Unlock()
	if ctx.Err() != nil {
		return // shutting down: the engine stops too
	}

	for _, name := range remove {
		if err := e.cfg.Registry.RemoveNode(ctx, name); err != nil {
			e.log.Error("remove a Slurm node", "node", name, "err", err)
		}
	}
	for _, n := range add {
		if err := e.cfg.Registry.AddNode(ctx, n); err != nil {
			e.log.Error("add a Slurm node", "node", n.name, "err", err)
			e.mu.Lock()
			n.registered = false
			e.mu.Unlock()
			delete(draining, n.name)
			continue
		}
		e.log.Info("Slurm node joined", "node", n.name, "gpus", len(n.Devices()))
	}
	e.syncDrains(draining)
}

// syncDrains drains in gpuportal the nodes Slurm drains, and resumes them
// when Slurm does. A node an admin drained in gpuportal stays drained.
func (e *Executor) syncDrains(draining map[string]bool) {
	var already map[string]bool
	for name, on := range draining {
		e.mu.Lock()
		ours := e.drained[name]
		e.mu.Unlock()
		if on == ours {
			continue
		}
		if on && already == nil {
			already = make(map[string]bool)
			for _, st := range e.cfg.Registry.NodeStatuses() {
				already[st.Name] = st.Draining
			}
		}
		if on && already[name] {
			continue // drained in gpuportal already: not ours to resume
		}
		if err := e.cfg.Registry.MirrorDraining(name, on); err != nil {
			e.log.Error("drain a node as Slurm does", "node", name, "drain", on, "err", err)
			continue
		}
		e.mu.Lock()
		if on {
			e.drained[name] = true
		} else {
			delete(e.drained, name)
		}
		e.mu.Unlock()
		if on {
			e.log.Info("node drained in Slurm: no new jobs there", "node", name)
		} else {
			e.log.Info("node resumed in Slurm", "node", name)
		}
	}
}

// syncJobs reports the runs that ended, and cancels those Slurm did not
// start in time.
func (e *Executor) syncJobs(ctx context.Context, jobs []Job, readAt time.Time) {
	byID := make(map[int64]Job, len(jobs))
	for _, j := range jobs {
		byID[j.ID] = j
	}
	now := e.cfg.Now()
	var exits []job.Exit
	var cancel []int64
	var missing []int64
	e.mu.Lock()
	// A run may wait in Slurm for the runs it replaces to end, within
	// their grace period: its start timeout counts from their end.
	stopping := make(map[string]bool)
	for _, r := range e.runs {
		if r.stopping {
			stopping[r.node] = true
		}
	}
	for id, r := range e.runs {
		j, ok := byID[id]
		if !ok || j.Name != r.name {
			// Slurm lists a job from the moment sbatch returns: a run
			// recorded after the reading began may be missing from it.
			if r.recorded.Before(readAt) {
				missing = append(missing, id)
			}
			continue
		}
		switch {
		case j.Finished():
			delete(e.runs, id)
			if ex, ok := e.exitLocked(r, j, now); ok {
				exits = append(exits, ex)
			}
		case j.Started():
			r.running = true
			if !r.warnedGPUs && len(j.GPUs) > 0 && !slices.Equal(j.GPUs, r.claimed) {
				r.warnedGPUs = true
				e.log.Warn("Slurm allocated other GPUs than gpuportal chose; the job uses gpuportal's",
					"job", r.jobID, "slurm_job", id, "node", r.node, "slurm_gpus", j.GPUs, "gpus", r.gpus)
			}
		case !r.released.IsZero() && stopping[r.node]:
			r.released = now
		case !r.released.IsZero() && !r.stopping && r.failure == "" && now.Sub(r.released) > e.cfg.StartTimeout:
			r.failure = fmt.Sprintf("Slurm did not start it within %s (%s)", e.cfg.StartTimeout, j.Reason)
			cancel = append(cancel, id)
		}
	}
	e.mu.Unlock()
	if len(missing) > 0 {
		exits = append(exits, e.missing(missing, now)...)
	}
	for _, id := range cancel {
		e.log.Warn("cancelling a job Slurm did not start in time", "slurm_job", id)
		if err := e.cfg.Client.Cancel(ctx, id); err != nil {
			e.log.Error("cancel a job Slurm did not start", "slurm_job", id, "err", err)
		}
	}
	for _, ex := range exits {
		select {
		case e.cfg.Registry.Exits() <- ex:
		case <-ctx.Done():
			return
		}
	}
}

// missing ends the runs squeue no longer lists, from the job completion
// log where there is one.
func (e *Executor) missing(ids []int64, now time.Time) []job.Exit {
	done := make(map[int64]Job)
	if e.cfg.JobCompFile != "" {
		jobs, err := ReadJobComp(e.cfg.JobCompFile, e.cfg.JobCompZone)
		if err != nil {
			e.log.Error("read Slurm's job completion log", "err", err)
		}
		for _, j := range jobs {
			done[j.ID] = j // the last record of an ID wins
		}
	}
	var exits []job.Exit
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		r := e.runs[id]
		if r == nil {
			continue
		}
		delete(e.runs, id)
		j, ok := done[id]
		if !ok || j.Name != r.name {
			j = Job{ID: id, Name: r.name, State: "VANISHED", Reason: "squeue no longer lists it"}
		}
		if ex, ok := e.exitLocked(r, j, now); ok {
			exits = append(exits, ex)
		}
	}
	return exits
}

// exitLocked is how run r ended, as Slurm's job j reports it; not ok when
// nobody is to be told: its node left the engine, which has requeued or
// will requeue the job.
func (e *Executor) exitLocked(r *run, j Job, now time.Time) (job.Exit, bool) {
	ex := job.Exit{Node: r.node, JobID: r.jobID, Run: r.run, At: j.EndTime}
	if ex.At.IsZero() || ex.At.After(now) {
		ex.At = now
	}
	code, sig := j.ExitCode()
	switch {
	case r.failure != "":
		ex.ExitCode, ex.Err = -1, r.failure
	case j.State == "COMPLETED" || (j.State == "FAILED" && sig == 0 && code > 0):
		ex.ExitCode = code
	default:
		ex.ExitCode, ex.Err = -1, describeEnd(j)
		ex.Infra = j.State == "NODE_FAIL"
		switch {
		case j.State == "CANCELLED" && !r.stopping:
			// An administrator's scancel: a cancel, not a failure.
			ex.EndedAs = job.Cancelled
		case j.State == "TIMEOUT":
			ex.EndedAs = job.TimedOut
		}
	}
	if n := e.nodes[r.node]; n == nil || !n.registered {
		e.log.Info("run ended on a node gpuportal lost", "job", r.jobID, "slurm_job", r.slurmID, "node", r.node, "state", j.State)
		return ex, false
	}
	e.log.Debug("run ended in Slurm", "job", r.jobID, "slurm_job", r.slurmID, "node", r.node,
		"state", j.State, "exit_code", ex.ExitCode, "err", ex.Err)
	return ex, true
}

// describeEnd says how a job that did not simply exit ended.
func describeEnd(j Job) string {
	switch j.State {
	case "CANCELLED":
		return "cancelled in Slurm"
	case "NODE_FAIL":
		return "node failure in Slurm"
	case "TIMEOUT":
		return "Slurm's time limit reached"
	case "OUT_OF_MEMORY":
		return "out of memory (Slurm)"
	case "PREEMPTED":
		return "preempted by Slurm"
	case "VANISHED":
		return "Slurm lost track of it (" + j.Reason + ")"
	}
	why := ""
	if j.Reason != "" && j.Reason != "None" && j.Reason != "NonZeroExitCode" {
		why = ", Slurm says " + j.Reason
	}
	if _, sig := j.ExitCode(); sig != 0 {
		return job.KilledBy(sig) + why
	}
	return fmt.Sprintf("ended in Slurm as %s%s", j.State, why)
}

// jobIDOf reads the gpuportal job ID from a Slurm job name, PREFIX-ID.
func (e *Executor) jobIDOf(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, e.cfg.JobPrefix+"-")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	return id, err == nil && id > 0
}

// jobName is the Slurm job name of gpuportal job id.
func (e *Executor) jobName(id int64) string {
	return e.cfg.JobPrefix + "-" + strconv.FormatInt(id, 10)
}

// workdir is the folder run s starts in: the folder it asked for
// (relative to its job folder when not absolute), else its job folder.
func (e *Executor) workdir(s job.Spec) string {
	switch {
	case s.Dir == "":
		return e.jobDir(s.JobID)
	case filepath.IsAbs(s.Dir):
		return filepath.Clean(s.Dir)
	}
	return filepath.Join(e.jobDir(s.JobID), s.Dir)
}

// jobDir is the folder of gpuportal job id in the work folder.
func (e *Executor) jobDir(id int64) string {
	return filepath.Join(e.cfg.WorkDir, "jobs", strconv.FormatInt(id, 10))
}

// ErrRootJobs is why the executor of a server running as root, with no
// user to run jobs as, refuses command jobs.
var ErrRootJobs = errors.New("gpuportal runs as root and jobs never run as root unless asked: " +
	"start it with --slurm-run-as USER (or --slurm-run-as root to allow it)")

// unavailableError is a start that Slurm refused or could not be asked:
// not the job's fault, so the engine queues it again (it matches
// job.ErrDisconnected).
type unavailableError struct{ err error }

func (e unavailableError) Error() string   { return e.err.Error() }
func (e unavailableError) Unwrap() []error { return []error{e.err, job.ErrDisconnected} }

// start submits a run of s held and pinned to node n and the GPUs the
// scheduler chose, then releases it.
func (e *Executor) start(ctx context.Context, n *node, s job.Spec) error {
	if s.Image != "" {
		// Never the command outside the image it asked for.
		return fmt.Errorf("start job %d on %s: it names container image %s, and the Slurm executor runs no container jobs (they need gpuportal agents with --container-runtime)", s.JobID, n.name, s.Image)
	}
	if s.Gang.Tasks() > 1 {
		return fmt.Errorf("start job %d on %s: it asks for a process per GPU, which the Slurm executor does not start (gpuportal agents do)", s.JobID, n.name)
	}
	command := s.Command
	if len(command) == 0 {
		// A simulated job holds its GPUs for its remaining time.
		command = []string{"sleep", strconv.FormatFloat(max(s.SimRemaining.Seconds(), 0), 'f', 3, 64)}
	} else if e.runAs == nil && e.cfg.RunAs != agent.RunAsOwner && e.euid == 0 {
		return fmt.Errorf("start job %d on %s: %w", s.JobID, n.name, ErrRootJobs)
	}
	ra, err := e.jobRunAs(n.name, s)
	if err != nil {
		return fmt.Errorf("start job %d on %s: %w", s.JobID, n.name, err)
	}
	if err := e.makeJobDirs(s.JobID, ra); err != nil {
		return fmt.Errorf("start job %d on %s: %w", s.JobID, n.name, err)
	}
	gpus := slices.Clone(s.GPUs)
	slices.Sort(gpus)
	var resume job.Resume
	var resumeEnv []string
	if len(s.Command) > 0 {
		// As an agent does: the run is told of its checkpoint, and the
		// server records what it resumed from (node.Resumes).
		res, env, err := agent.BeginResume(e.CheckpointDir(s.JobID), e.runRecordPath(s.JobID), s.Run, e.cfg.Now())
		if err != nil {
			e.log.Warn("job's checkpoint folder not looked at: it starts without GPUPORTAL_RESUME", "job", s.JobID, "run", s.Run, "err", err)
		} else {
			resume, resumeEnv = res, env
		}
	}

	e.mu.Lock()
	if err := n.checkGPUsLocked(gpus); err != nil {
		e.mu.Unlock()
		return fmt.Errorf("start job %d on %s: %w", s.JobID, n.name, err)
	}
	// A run of the same job there that has not ended is the engine's no
	// longer: it is cancelled, and its end is reported to nobody.
	var stale []int64
	for id, r := range e.runs {
		if r.jobID == s.JobID && r.node == n.name {
			stale = append(stale, id)
			delete(e.runs, id)
		}
	}
	r := &run{name: e.jobName(s.JobID), jobID: s.JobID, run: s.Run, node: n.name, gpus: gpus, resume: resume}
	r.claimed, r.cpus, r.memMiB = e.shareLocked(n, gpus)
	e.mu.Unlock()
	for _, id := range stale {
		e.log.Warn("cancelling an earlier run of a job being started again", "job", s.JobID, "slurm_job", id)
		if err := e.cfg.Client.Cancel(ctx, id); err != nil {
			e.log.Warn("cancel an earlier run", "slurm_job", id, "err", err)
		}
	}

	sub := Submission{
		Name: r.name, Comment: runComment(s.JobID, s.Run, gpus), Partition: e.cfg.Partition, Node: n.name,
		GPUs: len(r.claimed), CPUs: r.cpus, MemMiB: r.memMiB,
		Dir: e.workdir(s), Output: e.LogPath(s.JobID), Held: true,
		Script: e.script, Args: command, Env: e.jobEnv(s, gpus, ra, resumeEnv),
	}
	if ra != nil && e.euid == 0 {
		// Both: sbatch run by root for another user keeps root's group
		// unless told.
		sub.User, sub.Group = ra.name, strconv.Itoa(ra.gid)
	}
	id, err := e.cfg.Client.Submit(ctx, sub)
	if err != nil {
		return unavailableError{fmt.Errorf("start job %d on %s: %w", s.JobID, n.name, err)}
	}
	r.slurmID, r.recorded = id, e.cfg.Now()
	e.mu.Lock()
	e.runs[id] = r
	e.mu.Unlock()
	if err := e.cfg.Client.Release(ctx, id); err != nil {
		e.mu.Lock()
		delete(e.runs, id)
		e.mu.Unlock()
		if cerr := e.cfg.Client.Cancel(context.WithoutCancel(ctx), id); cerr != nil {
			e.log.Error("cancel a job that could not be released", "slurm_job", id, "err", cerr)
		}
		return unavailableError{fmt.Errorf("start job %d on %s: %w", s.JobID, n.name, err)}
	}
	e.mu.Lock()
	r.released = e.cfg.Now()
	e.mu.Unlock()
	e.log.Info("job submitted to Slurm", "job", s.JobID, "slurm_job", id, "node", n.name, "gpus", gpus,
		"gres", len(r.claimed), "cpus", r.cpus, "mem_mib", r.memMiB)
	return nil
}

// shareLocked is what a run on gpus asks of Slurm on node n: the GPUs no
// other run of gpuportal's there holds (a GPU shared by co-located jobs
// is counted once), and CPUs and memory in proportion to its GPUs, within
// what gpuportal's other runs there leave. Runs being stopped hold
// nothing: the scheduler gave their GPUs away, and Slurm starts the new
// run once they have ended.
func (e *Executor) shareLocked(n *node, gpus []int) (claimed []int, cpus int, memMiB int64) {
	held := make(map[int]bool)
	usedCPUs, usedMem := 0, int64(0)
	for _, r := range e.runs {
		if r.node != n.name || r.stopping {
			continue
		}
		for _, g := range r.gpus {
			held[g] = true
		}
		usedCPUs += r.cpus
		usedMem += r.memMiB
	}
	for _, g := range gpus {
		if !held[g] {
			claimed = append(claimed, g)
		}
	}
	total := max(len(n.devices), 1)
	cpus = min(n.cpus*len(gpus)/total, n.cpus-usedCPUs)
	memMiB = min(n.memMiB*int64(len(gpus))/int64(total), n.memMiB-usedMem)
	return claimed, max(cpus, 1), max(memMiB, 1)
}

// runComment is a run's Slurm comment: its gpuportal job and GPUs, read
// back when a restarted server adopts it.
func runComment(jobID, run int64, gpus []int) string {
	return fmt.Sprintf("gpuportal job %d run=%d gpus=%s", jobID, run, joinInts(gpus))
}

// commentRun reads the run's number back from its comment, 0 when it has
// none (a run started before runs were numbered).
func commentRun(comment string) int64 {
	for _, word := range strings.Fields(comment) {
		if v, ok := strings.CutPrefix(word, "run="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// commentGPUs reads the GPUs back from a run's comment.
func commentGPUs(comment string) []int {
	for _, word := range strings.Fields(comment) {
		if list, ok := strings.CutPrefix(word, "gpus="); ok && list != "" {
			if idx, err := parseIndexList(list); err == nil {
				return idx
			}
		}
	}
	return nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// jobEnv is sbatch's whole environment, which the job inherits: a PATH,
// the Slurm configuration's location, the user's identity, the job's own
// variables (names checked at submission and again here: never the
// identity or gpuportal's), then gpuportal's variables, resume's those
// that tell the run of its checkpoint (agent.BeginResume). Nothing else
// of the server's environment reaches the job.
func (e *Executor) jobEnv(s job.Spec, gpus []int, ra *runAs, resume []string) []string {
	jobID, run := s.JobID, s.Run
	env := []string{"PATH=" + e.cfg.Path}
	for _, kv := range s.Env {
		name, _, _ := strings.Cut(kv, "=")
		if job.CheckEnvName(name) != nil || name == "HOME" || name == "USER" || name == "LOGNAME" || name == "SLURM_CONF" {
			continue
		}
		if name == "PATH" {
			env[0] = kv
			continue
		}
		env = append(env, kv)
	}
	if conf := os.Getenv("SLURM_CONF"); conf != "" {
		env = append(env, "SLURM_CONF="+conf)
	}
	if ra != nil {
		env = append(env, "HOME="+ra.home, "USER="+ra.name, "LOGNAME="+ra.name)
	} else if u, err := user.Current(); err == nil {
		env = append(env, "HOME="+u.HomeDir, "USER="+u.Username, "LOGNAME="+u.Username)
	}
	env = append(env,
		"GPUPORTAL_JOB_ID="+strconv.FormatInt(jobID, 10),
		"GPUPORTAL_RUN="+strconv.FormatInt(run, 10),
		"GPUPORTAL_CHECKPOINT_DIR="+e.CheckpointDir(jobID),
		"GPUPORTAL_GPUS="+joinInts(gpus),
	)
	env = append(env, resume...)
	if s.Gang != nil {
		// The rendezvous of a job on several nodes (docs/multinode.md),
		// without the hostfile, which this executor does not write.
		for _, kv := range s.Gang.Env("") {
			if !strings.HasPrefix(kv, "GPUPORTAL_HOSTFILE=") {
				env = append(env, kv)
			}
		}
	}
	return append(env, s.Array.Env()...)
}

// makeJobDirs creates the job's folder and its checkpoint folder, owned by
// the user ra the job runs as (nil: the server's), 0700, never through a
// link the job put there (agent.MakeJobDirs).
func (e *Executor) makeJobDirs(jobID int64, ra *runAs) error {
	uid, gid := -1, -1
	if ra != nil && e.euid == 0 && ra.uid != 0 {
		uid, gid = ra.uid, ra.gid
	}
	if err := agent.MakeJobDirs(filepath.Join(e.cfg.WorkDir, "jobs"), jobID, uid, gid, agent.DefaultJobDirMode); err != nil {
		if ra != nil {
			return fmt.Errorf("%w (for %s)", err, ra.name)
		}
		return err
	}
	return nil
}

// jobRunAs is the user job s runs as: RunAs, or under agent.RunAsOwner
// its owner's account, which must exist and be neither root nor a system
// account; a refusal is a *job.AccountError, so the engine waits the job.
// Simulated jobs run as the executor's user.
func (e *Executor) jobRunAs(node string, s job.Spec) (*runAs, error) {
	if e.cfg.RunAs != agent.RunAsOwner || len(s.Command) == 0 {
		return e.runAs, nil
	}
	if s.Account == "" {
		return nil, fmt.Errorf("jobs run as their owners (--slurm-run-as %s) and job %d has no owner's account", agent.RunAsOwner, s.JobID)
	}
	if !agent.ValidAccountName(s.Account) {
		return nil, &job.AccountError{Account: s.Account, Node: node, Why: "it is not an account name"}
	}
	u, err := agent.LookupUser(s.Account)
	var unknown user.UnknownUserError
	switch {
	case errors.As(err, &unknown):
		return nil, &job.AccountError{Account: s.Account, Node: node}
	case err != nil:
		return nil, fmt.Errorf("look up the Unix account of job %d's owner: %w", s.JobID, err)
	case u.UID == 0:
		return nil, &job.AccountError{Account: s.Account, Node: node, Why: "it is root"}
	case u.UID < e.cfg.MinUID:
		return nil, &job.AccountError{Account: s.Account, Node: node,
			Why: fmt.Sprintf("its user id %d is below --slurm-min-uid %d (a system account)", u.UID, e.cfg.MinUID)}
	}
	if dir, mode, ok := agent.Blocked(filepath.Join(e.cfg.WorkDir, "jobs"), &u); !ok {
		return nil, fmt.Errorf("job %d: %s cannot pass through %s (mode %04o) to its job folder: let others pass through it (chmod o+x) or choose another --slurm-work-dir", s.JobID, u.Name, dir, mode)
	}
	return &runAs{name: u.Name, uid: u.UID, gid: u.GID, groups: u.Groups, home: u.Home}, nil
}

// LogPath is where a job's output is: WorkDir/jobs/ID/output.log, written
// by Slurm on the node and read by the server through the shared folder.
func (e *Executor) LogPath(jobID int64) string {
	return filepath.Join(e.jobDir(jobID), "output.log")
}

// runRecordPath is the record of a job's runs, from which a run learns
// which earlier one wrote its checkpoint: WorkDir/runs/ID, the server's
// alone (agent.BeginResume).
func (e *Executor) runRecordPath(jobID int64) string {
	return filepath.Join(e.cfg.WorkDir, "runs", strconv.FormatInt(jobID, 10))
}

// CheckpointDir is the folder a job finds in GPUPORTAL_CHECKPOINT_DIR,
// kept across its runs on every node.
func (e *Executor) CheckpointDir(jobID int64) string {
	return filepath.Join(e.jobDir(jobID), "checkpoint")
}

// stop asks the run of jobID on node to end: SIGTERM to all its processes
// (scancel --full --signal=TERM), then after Grace a cancel. A run Slurm
// has not started is cancelled at once.
func (e *Executor) stop(ctx context.Context, nodeName string, ref job.RunRef) error {
	jobID := ref.Job
	e.mu.Lock()
	var r *run
	for _, x := range e.runs {
		if x.jobID == ref.Job && x.run == ref.Run && x.node == nodeName {
			r = x
		}
	}
	if r == nil {
		e.mu.Unlock()
		return nil // ended already
	}
	r.stopping = true
	id, running, base := r.slurmID, r.running, e.ctx
	e.mu.Unlock()
	if running {
		err := e.cfg.Client.Signal(ctx, id, "TERM")
		if err == nil {
			time.AfterFunc(e.cfg.Grace, func() { e.kill(base, id) })
			return nil
		}
		e.log.Debug("signal failed; cancelling", "slurm_job", id, "err", err)
	}
	if err := e.cfg.Client.Cancel(ctx, id); err != nil {
		return fmt.Errorf("stop job %d on %s: %w", jobID, nodeName, err)
	}
	return nil
}

// kill cancels a run that has not ended within the grace period.
func (e *Executor) kill(ctx context.Context, id int64) {
	e.mu.Lock()
	_, alive := e.runs[id]
	e.mu.Unlock()
	if !alive || ctx.Err() != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	e.log.Info("grace period over: cancelling", "slurm_job", id)
	if err := e.cfg.Client.Cancel(cctx, id); err != nil {
		e.log.Warn("cancel after the grace period", "slurm_job", id, "err", err)
	}
}

// lookupRunAs resolves the user jobs run as, for a server running as
// euid; an empty name is the server's own user.
func lookupRunAs(name string, euid int) (*runAs, error) {
	if name == "" {
		return nil, nil
	}
	if name == agent.RunAsOwner {
		if euid != 0 {
			return nil, fmt.Errorf("run jobs as their owners: only root can submit jobs for other users (sbatch --uid)")
		}
		return nil, nil
	}
	u, err := agent.LookupUser(name)
	if err != nil {
		return nil, err
	}
	if euid != 0 && u.UID != euid {
		return nil, fmt.Errorf("run jobs as %q: only root can submit jobs for another user (sbatch --uid)", name)
	}
	return &runAs{name: u.Name, uid: u.UID, gid: u.GID, groups: u.Groups, home: u.Home}, nil
}

// runsAsOthers reports whether jobs run as other accounts than the
// server's (euid): each as its owner's, or as account ra named by
// --slurm-run-as name.
func runsAsOthers(name string, ra *runAs, euid int) bool {
	return name == agent.RunAsOwner || ra != nil && ra.uid != euid
}
