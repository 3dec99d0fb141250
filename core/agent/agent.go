// Package agent runs jobs on one machine: it starts their processes (or
// simulated workloads) on the GPUs the scheduler chose, stops them on
// request with SIGTERM then SIGKILL, keeps their output, and reports how
// they ended.
//
// Local does the work on the machine it runs on; the server drives it
// in-process (serve --dev) or, on other machines, through a Client that
// connects out to the server (gpuportal agent; protocol in package wire).
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/gate"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/jobfiles"
	"github.com/gpuportal/gpuportal/core/lanes"
)

// Config sets up a Local agent.
type Config struct {
	Name    string
	Backend gpu.Backend
	// WorkDir holds each job's folder, WorkDir/jobs/ID: the job runs there,
	// its output goes to output.log and its checkpoint folder is
	// checkpoint/, kept across the job's runs on this machine.
	WorkDir string
	Grace   time.Duration // between SIGTERM and SIGKILL
	// SimCheckpoint is how long a simulated job, asked to stop, takes to
	// save its checkpoint and exit, as a training script does on SIGTERM
	// (simStopped): its GPUs stay held meanwhile, as a real job's do. 0:
	// it exits at once. One at Grace or longer is killed at Grace.
	SimCheckpoint time.Duration
	CPUs          int
	MemMiB        int64
	Logger        *slog.Logger
	// RunAs is the user that command jobs run as. Empty runs them as the
	// agent's own user, as the in-process agent of serve --dev does;
	// RunAsOwner ("owner") runs each as its owner's Unix account
	// (job.Spec.Account), which needs the agent to run as root (runas.go).
	RunAs string
	// AllowRootOwner lets RunAsOwner run the jobs of an owner whose
	// account is root as root; they are refused otherwise.
	AllowRootOwner bool
	// Owners finds the account a job's owner (job.Spec.Account) runs as
	// under RunAsOwner; nil: LookupUser, the machine's name service.
	// serve --dev run as root gives each user a throwaway account.
	Owners func(account string) (User, error)
	// OwnersGroups are groups every account Owners returns belongs to: a
	// folder above the work folder that lets these groups pass, and not
	// others, still lets the jobs reach their folders.
	OwnersGroups []uint32
	// MinUID is the lowest user ID RunAsOwner runs a job as (root aside);
	// 0: DefaultMinUID. System accounts sit below it.
	MinUID int
	// JobDirMode is the mode of each job's folder and checkpoint folder,
	// which belong to the account the job runs as; 0: DefaultJobDirMode
	// (0700). A group mode such as 0750 shares them with the account's
	// group; others never get access (CheckJobDirMode, jobdir.go).
	JobDirMode os.FileMode
	// RefuseRoot refuses command jobs that would run as root because
	// RunAs is empty and the agent runs as root. The remote agent sets it,
	// so jobs run as root only when RunAs says "root".
	RefuseRoot bool
	// Gate, when set, serves the Salus gate on WorkDir/gate.sock with
	// these lanes (policy, padding, aging), so that command jobs with
	// job.Spec.Sharing share their GPUs an iteration at a time.
	Gate *lanes.Config
	// Cgroups enforces jobs' CPU and memory allocations (job.Spec.Resources)
	// with cgroups under CgroupRoot (default /sys/fs/cgroup) when they
	// are writable; the agent says once why not otherwise. Profile sets
	// the CPU profiling phase's steps (see ProfileCPU).
	Cgroups    bool
	CgroupRoot string
	Profile    ProfileConfig
	// MonitorOnly makes the agent watch its GPUs and refuse to start jobs
	// (see monitor.go); ProcDir is where it reads processes' environments,
	// default /proc.
	MonitorOnly bool
	ProcDir     string
	// PassEnv names variables of the agent's environment that jobs get
	// besides the minimal environment (KeptEnv); nothing else of the
	// agent's environment reaches a job (agent --pass-env).
	PassEnv []string
	// Watchdog, when set, is told the process group of every command job,
	// so that it stops them if this agent freezes or dies (watchdog.go).
	Watchdog *WatchdogLink
	// Backstop is how long after a run's time is up (job.Spec.TimeLeft)
	// the agent stops it itself; default job.BackstopMargin.
	Backstop time.Duration
	// Containers, when set, runs jobs that name an image in containers
	// (container.go); nil: such jobs are refused.
	Containers *ContainerConfig
	// DataPaths are the folders besides each job's own whose files its
	// owner may browse, download and upload through the portal, as the
	// job's account (files.go; agent --data-path); UserToken in a
	// folder stands for the owner's Unix account. FileLimits bound
	// uploads and archives (agent --max-upload, --max-archive).
	DataPaths  []jobfiles.Root
	FileLimits jobfiles.Limits
	// MakeDataPaths makes a data path's folder when it is missing, the
	// first time the owner's files are reached, belonging to the account
	// the owner's jobs run as (serve --dev: each user's folder under its
	// data folder). Otherwise the machine's administrators make them.
	MakeDataPaths bool
}

// ErrRootJobs is why an agent that runs as root, with no user to run jobs
// as, refuses command jobs.
var ErrRootJobs = errors.New("the agent runs as root and jobs never run as root unless asked: " +
	"start the agent with --run-as owner (each job as its owner's Unix account), --run-as USER, or --run-as root to allow it")

// Local runs jobs on the machine it runs on.
type Local struct {
	cfg   Config
	exits chan<- job.Exit
	runAs *runAs // nil: the agent's own user, or each job's owner (owners)
	euid  int    // the agent's effective user
	// lookup finds a job owner's account (LookupUser).
	lookup func(name string) (User, error)
	// pgidOf finds the process group of a process.
	pgidOf func(pid int) (int, error)

	gate *gate.Server // nil: no gate
	lim  limits       // CPU and memory allocations (resources.go)
	// srunDir is put first on command jobs' PATH: the folder of srun's
	// link to this binary (srun.go); "" when it could not be made.
	srunDir string

	mu   sync.Mutex
	runs map[int64]*run
}

type run struct {
	id   int64  // the run's number (job.Spec.Run)
	stop func() // asks the run to end
	done chan struct{}
	pgid int   // the process group of a command job; 0 for a simulated one
	gpus []int // the machine's GPUs it holds (job.Spec.GPUs)
	// sessionPort is the loopback port a session serves on; 0 for a
	// batch run (session.go).
	sessionPort int
	// exceeded is why the gate had the run stopped.
	exceeded *gate.ExceededError
	// fenced: stopped because no server was heard (fence.go).
	fenced bool
	// timedOut: stopped by its own time limit's backstop (job.Spec.TimeLeft).
	timedOut bool
	// restoring: the server's copy of its checkpoint is being restored
	// and its process not started yet (checkpoint.go); stopAsked: a stop
	// came meanwhile, and it never starts.
	restoring, stopAsked bool
	// container is a container job's container (container.go); init and
	// pidns its init's process ID and PID namespace once it runs (0
	// before); stopping: asked to stop.
	container string
	init      int
	pidns     uint64
	stopping  bool
}

// otherAccounts tells whether jobs run as accounts other than the
// agent's (each job's owner, or the one of --run-as), and how to check
// what those accounts may reach (for blockedFor): that one account, or,
// for owners, anybody's but for the groups every owner's account is in
// (others' search permission, or those groups'); who names them.
func otherAccounts(cfg Config, ra *runAs) (check *runAs, who string, other bool) {
	if cfg.RunAs != RunAsOwner && (ra == nil || ra.cred == nil) {
		return nil, "", false
	}
	if ra != nil {
		return ra, ra.name, true
	}
	return &runAs{uid: -1, groups: cfg.OwnersGroups}, "the users jobs run as", true
}

// New returns an agent that reports job exits on exits.
func New(cfg Config, exits chan<- job.Exit) (*Local, error) {
	if cfg.Name == "" {
		return nil, errors.New("agent: name is empty")
	}
	if cfg.Backend == nil {
		return nil, errors.New("agent: no GPU back end")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.Backstop <= 0 {
		cfg.Backstop = job.BackstopMargin
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	dir, err := filepath.Abs(cfg.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("agent %s: work dir: %w", cfg.Name, err)
	}
	cfg.WorkDir = dir
	if err := os.MkdirAll(filepath.Join(cfg.WorkDir, "jobs"), 0o750); err != nil {
		return nil, fmt.Errorf("agent %s: work dir: %w", cfg.Name, err)
	}
	if err := CheckPassEnv(cfg.PassEnv); err != nil {
		return nil, fmt.Errorf("agent %s: pass-env: %w", cfg.Name, err)
	}
	if cfg.JobDirMode != 0 {
		if err := CheckJobDirMode(cfg.JobDirMode); err != nil {
			return nil, fmt.Errorf("agent %s: job folder mode %w", cfg.Name, err)
		}
	}
	ra, err := lookupRunAs(cfg.RunAs, os.Geteuid())
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", cfg.Name, err)
	}
	if check, who, other := otherAccounts(cfg, ra); other {
		// The job's user must reach its own folder, WORK/jobs/ID, and no
		// other: the folders above it may be passed through, not listed.
		if err := openJobsDir(cfg.WorkDir, check, who, "--work-dir"); err != nil {
			return nil, fmt.Errorf("agent %s: %w", cfg.Name, err)
		}
	}
	a := &Local{
		cfg: cfg, exits: exits, runAs: ra, euid: os.Geteuid(), pgidOf: syscall.Getpgid, lookup: LookupUser,
		runs: make(map[int64]*run),
	}
	if cfg.Owners != nil {
		a.lookup = cfg.Owners
	}
	a.lim.setup(cfg)
	a.srunDir = a.setupSrun()
	if cfg.Gate != nil {
		if err := a.startGate(*cfg.Gate); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Name is the machine's name.
func (a *Local) Name() string { return a.cfg.Name }

// Devices lists the machine's GPUs.
func (a *Local) Devices() []gpu.Device { return a.cfg.Backend.Devices() }

// Resources returns the machine's CPUs and host memory.
func (a *Local) Resources() (cpus int, memMiB int64) { return a.cfg.CPUs, a.cfg.MemMiB }

// Sample reads every GPU. The memory of processes that belong to a job
// (by process group) is counted as the job's.
func (a *Local) Sample(now time.Time) []gpu.Sample {
	if a.cfg.MonitorOnly {
		return a.monitorSample(now)
	}
	ss := a.cfg.Backend.Sample(now)
	var groups map[int]int64
	for i := range ss {
		if len(ss[i].Processes) == 0 {
			continue
		}
		if groups == nil {
			groups = a.processGroups()
		}
		attributeProcesses(&ss[i], groups, a.groupOf)
	}
	a.countHolders(ss)
	return ss
}

// countHolders gives every job on a GPU an entry in its sample's Jobs,
// 0 MiB where none of its processes holds memory there yet: a job's
// memory is its own processes', never the GPU's (which may hold others'
// processes, or the driver's reserved memory where it counts it).
func (a *Local) countHolders(ss []gpu.Sample) {
	a.mu.Lock()
	on := make(map[int][]int64)
	for id, r := range a.runs {
		for _, g := range r.gpus {
			on[g] = append(on[g], id)
		}
	}
	a.mu.Unlock()
	for i := range ss {
		s := &ss[i]
		added := false
		for _, id := range on[s.Index] {
			if !slices.ContainsFunc(s.Jobs, func(j gpu.JobMem) bool { return j.JobID == id }) {
				s.Jobs = append(s.Jobs, gpu.JobMem{JobID: id})
				added = true
			}
		}
		if added {
			sort.Slice(s.Jobs, func(x, y int) bool { return s.Jobs[x].JobID < s.Jobs[y].JobID })
		}
	}
}

// processGroups maps the process group of each running command job to the
// job.
func (a *Local) processGroups() map[int]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[int]int64, len(a.runs))
	for id, r := range a.runs {
		if r.pgid > 0 {
			out[r.pgid] = id
		}
		if r.init > 0 {
			out[r.init] = id // a container's processes, by groupOf
		}
	}
	return out
}

// groupOf is the process group of a process, or for a process of a
// container job's container, the container's init (processGroups).
func (a *Local) groupOf(pid int) (int, error) {
	a.mu.Lock()
	var inits map[uint64]int
	for _, r := range a.runs {
		if r.pidns != 0 {
			if inits == nil {
				inits = make(map[uint64]int)
			}
			inits[r.pidns] = r.init
		}
	}
	a.mu.Unlock()
	if inits != nil {
		if ns, err := pidNamespace(pid); err == nil {
			if init, ok := inits[ns]; ok {
				return init, nil
			}
		}
	}
	return a.pgidOf(pid)
}

// attributeProcesses moves the memory of s's processes that belong to a
// job's process group into s.Jobs.
func attributeProcesses(s *gpu.Sample, groups map[int]int64, pgidOf func(int) (int, error)) {
	perJob := make(map[int64]int64)
	var others []gpu.ProcMem
	for _, p := range s.Processes {
		if pg, err := pgidOf(p.PID); err == nil {
			if id, ok := groups[pg]; ok {
				perJob[id] += p.MemMiB
				continue
			}
		}
		others = append(others, p)
	}
	s.Processes = others
	for i, j := range s.Jobs {
		if m, ok := perJob[j.JobID]; ok {
			s.Jobs[i].MemMiB += m
			delete(perJob, j.JobID)
		}
	}
	for id, m := range perJob {
		s.Jobs = append(s.Jobs, gpu.JobMem{JobID: id, MemMiB: m})
	}
	sort.Slice(s.Jobs, func(x, y int) bool { return s.Jobs[x].JobID < s.Jobs[y].JobID })
}

// Running lists the runs that have not ended, by job.
func (a *Local) Running() []job.RunRef {
	a.mu.Lock()
	defer a.mu.Unlock()
	refs := make([]job.RunRef, 0, len(a.runs))
	for id, r := range a.runs {
		refs = append(refs, job.RunRef{Job: id, Run: r.id})
	}
	sort.Slice(refs, func(x, y int) bool { return refs[x].Job < refs[y].Job })
	return refs
}

// LogPath is where a job's output is kept on this machine.
func (a *Local) LogPath(jobID int64) string {
	return filepath.Join(a.jobDir(jobID), "output.log")
}

// CheckpointDir is the folder a job finds in GPUPORTAL_CHECKPOINT_DIR: it
// is kept across the job's runs on this machine (preemptions, restarts),
// so the job can save its state there and resume from it. Across machines
// it is the same only where WorkDir is on a shared file system.
func (a *Local) CheckpointDir(jobID int64) string {
	return filepath.Join(a.jobDir(jobID), "checkpoint")
}

func (a *Local) jobDir(jobID int64) string {
	return filepath.Join(a.cfg.WorkDir, "jobs", strconv.FormatInt(jobID, 10))
}

// Start begins a run of the job. The run's end is reported as an Exit.
func (a *Local) Start(ctx context.Context, s job.Spec) error {
	if a.cfg.MonitorOnly {
		return a.refuseMonitorOnly(s.JobID)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.runs[s.JobID]; ok {
		return fmt.Errorf("start run %d of job %d on %s: %w (run %d)", s.Run, s.JobID, a.cfg.Name, job.ErrBusy, r.id)
	}
	if err := a.checkGPUs(s.GPUs); err != nil {
		return fmt.Errorf("start job %d on %s: %w", s.JobID, a.cfg.Name, err)
	}
	if (len(s.Command) > 0 || s.Session != nil) && a.runAs == nil && !a.owners() && a.cfg.RefuseRoot && a.euid == 0 {
		return fmt.Errorf("start job %d on %s: %w", s.JobID, a.cfg.Name, ErrRootJobs)
	}
	ra, err := a.jobRunAs(s)
	if err != nil {
		return fmt.Errorf("start job %d on %s: %w", s.JobID, a.cfg.Name, err)
	}
	if s.Gang != nil {
		if err := s.Gang.Check(); err != nil {
			return fmt.Errorf("start job %d on %s: %w", s.JobID, a.cfg.Name, err)
		}
		if s.Gang.Tasks() > 1 && (s.Image != "" || s.Session != nil || len(s.Command) == 0) {
			return fmt.Errorf("start job %d on %s: a process per GPU is for commands on the machine, not containers, sessions or simulated jobs", s.JobID, a.cfg.Name)
		}
	}
	dirRA := a.folderRunAs(s, ra)
	log, err := a.openJobDir(s.JobID, dirRA)
	if err != nil {
		return fmt.Errorf("start job %d on %s: %w", s.JobID, a.cfg.Name, err)
	}
	if s.Gang != nil {
		if err := a.writeJobFile(s.JobID, dirRA, job.HostfileName, []byte(s.Gang.Hostfile())); err != nil {
			log.Close()
			return fmt.Errorf("start job %d on %s: %w", s.JobID, a.cfg.Name, err)
		}
	}
	r := &run{id: s.Run, gpus: s.GPUs, done: make(chan struct{})}
	if a.needsRestore(s) {
		// The run is the agent's from now on (its GPUs held, a stop
		// heard); its process starts once the copy is in place.
		rctx, cancel := context.WithCancel(context.Background())
		r.restoring = true
		r.stop = func() {
			// A stop read before the launch and called after it stops
			// the process the launch started.
			a.mu.Lock()
			restoring, stop := r.restoring, r.stop
			r.stopAsked = r.stopAsked || restoring
			a.mu.Unlock()
			if restoring {
				cancel()
			} else {
				stop()
			}
		}
		a.runs[s.JobID] = r
		go func() {
			defer cancel()
			a.restoreThenLaunch(rctx, s, r, ra, log)
		}()
		return nil
	}
	return a.launch(s, r, ra, log, nil)
}

// restoreThenLaunch restores the server's copy of run r's checkpoint
// folder, then starts the run, unless it was stopped meanwhile; either
// way its end is reported as an Exit.
func (a *Local) restoreThenLaunch(ctx context.Context, s job.Spec, r *run, ra *runAs, log *os.File) {
	restored := a.restoreCheckpoint(ctx, s, log)
	a.mu.Lock()
	var err error
	if r.stopAsked {
		err = errors.New("stopped while its checkpoint was being restored, before it started")
		log.Close()
	} else if err = a.launch(s, r, ra, log, restored); err != nil {
		err = fmt.Errorf("could not start once its checkpoint was restored: %w", err)
	}
	r.restoring = false
	if err != nil {
		delete(a.runs, s.JobID)
		close(r.done)
	}
	a.mu.Unlock()
	if err != nil {
		// Not the job's fault: it waits again.
		a.exits <- job.Exit{Node: a.cfg.Name, JobID: s.JobID, Run: s.Run, ExitCode: -1, Err: err.Error(), At: time.Now(), Infra: true}
	}
}

// launch starts run r of s, its job folder made and its output open
// (log): the gate joined, the checkpoint looked at (restored: the
// server's copy put there, nil when none was), the process or container
// started; a.mu is held. It closes log when it fails.
func (a *Local) launch(s job.Spec, r *run, ra *runAs, log *os.File, restored *job.CheckpointCopy) error {
	gateEnv, err := a.joinGate(s)
	if err != nil {
		log.Close()
		return fmt.Errorf("start job %d on %s: %w", s.JobID, a.cfg.Name, err)
	}
	var resume *job.Resume
	if s.Checkpointed() {
		res, env, err := a.beginResume(s, time.Now(), restored)
		if err != nil {
			a.cfg.Logger.Warn("job's checkpoint folder not looked at: it starts without GPUPORTAL_RESUME", "job", s.JobID, "run", s.Run, "err", err)
		} else {
			resume, gateEnv = &res, append(gateEnv, env...)
			fmt.Fprint(log, resumeLine(res, a.cfg.Name))
		}
	}
	if s.Session != nil {
		ss, err := sessionCommand(s, a.jobDir(s.JobID), ra, a.sessionHost(s))
		if err != nil {
			fmt.Fprintf(log, "gpuportal: cannot start the session: %v\n", err)
			log.Close()
			a.leaveGate(s.JobID)
			return fmt.Errorf("start session of job %d on %s: %w", s.JobID, a.cfg.Name, err)
		}
		s.Command, r.sessionPort = ss.argv, ss.port
		gateEnv = append(gateEnv, ss.env...)
	}
	var wait func() (int, string)
	var cgroupParent string
	var cmdProcs runProcs
	switch {
	case s.Image != "":
		r.container = containerName(a.cfg.Name, job.RunRef{Job: s.JobID, Run: s.Run})
		if a.cfg.Containers != nil {
			cgroupParent = a.lim.prepare(s.JobID)
		}
		wait, r.stop, err = a.startContainer(s, r, ra, log, gateEnv, cgroupParent)
	case len(s.Command) > 0:
		cg := a.lim.open(s.JobID)
		wait, r.stop, cmdProcs, err = a.startProcess(s, ra, log, gateEnv, cg)
		r.pgid = cmdProcs.leader
		if err == nil && r.pgid > 0 {
			// The watchdog knows the job's group before anything else
			// is done: an agent frozen from here on still has it
			// fenced (TestFaults/FrozenAgent saw a run the watchdog
			// was not yet told of outlive its agent's lease).
			a.cfg.Watchdog.Add(r.pgid, a.cfg.Grace)
		}
		if cg != nil {
			cg.Close()
		}
	default:
		wait, r.stop = a.startSim(s, log)
	}
	if err != nil {
		log.Close()
		a.leaveGate(s.JobID)
		a.lim.drop(s.JobID)
		return fmt.Errorf("start job %d: %w", s.JobID, err)
	}
	if sim, ok := a.cfg.Backend.(*gpu.Sim); ok {
		sim.Attach(s.JobID, s.GPUs, s.Memory, time.Now())
		if s.Sharing != nil && a.gate != nil && len(s.Command) == 0 {
			sim.Gate(s.JobID)
		}
	}
	a.runs[s.JobID] = r
	var backstop *time.Timer
	if s.TimeLeft > 0 {
		backstop = time.AfterFunc(s.TimeLeft+a.cfg.Backstop, func() { a.timeUp(s.JobID, r) })
	}
	procs := jobProcs{pgid: r.pgid}
	if r.pgid > 0 {
		procs.members = cmdProcs.pids
	}
	if r.container != "" {
		procs = jobProcs{container: true, inCgroup: cgroupParent != "", members: func() ([]int, error) {
			a.mu.Lock()
			ns := r.pidns
			a.mu.Unlock()
			if ns == 0 {
				return nil, nil
			}
			return nsMembers(ns)
		}}
	}
	a.lim.begin(s, procs, log, a.LogPath(s.JobID), a.gateIterations(s))
	if resume != nil {
		a.lim.setCheckpoint(s.JobID, resume, a.checkpointReader(s))
	}
	go func() {
		code, why := wait()
		if backstop != nil {
			backstop.Stop()
		}
		if r.pgid > 0 {
			a.cfg.Watchdog.Remove(r.pgid)
		}
		a.lim.end(s.JobID)
		log.Close()
		measured := a.measured(s.JobID)
		var folder *job.CheckpointState
		if resume != nil {
			st := a.checkpointState(s)
			folder = &st
		}
		a.leaveGate(s.JobID)
		if sim, ok := a.cfg.Backend.(*gpu.Sim); ok {
			sim.Detach(s.JobID)
		}
		a.mu.Lock()
		delete(a.runs, s.JobID)
		exceeded, timedOut, fenced := r.exceeded, r.timedOut, r.fenced
		a.mu.Unlock()
		close(r.done)
		ex := job.Exit{Node: a.cfg.Name, JobID: s.JobID, Run: s.Run, ExitCode: code, Err: why, At: time.Now(), Measured: measured, Resume: resume, Checkpoint: folder}
		if exceeded != nil {
			ex.Err, ex.Requeue = "stopped by the agent: "+exceeded.Error(), &exceeded.Requeue
		}
		if timedOut {
			ex.Err, ex.EndedAs = "time limit reached: stopped by its agent", job.TimedOut
		}
		if fenced && code != 0 && !timedOut {
			// However late it died (the agent may have heard a server
			// again meanwhile), a fenced run is not the job's failure.
			ex.Infra, ex.Err = true, fencedErr
		}
		a.exits <- ex
	}()
	return nil
}

// timeUp stops run r of a job whose time is up: the backstop of the
// engine's time limit (job.Spec.TimeLeft), for when no server stopped it.
func (a *Local) timeUp(jobID int64, r *run) {
	a.mu.Lock()
	cur, ok := a.runs[jobID]
	if ok && cur == r {
		r.timedOut = true
	}
	a.mu.Unlock()
	if ok && cur == r {
		a.cfg.Logger.Warn("job's time is up and no server stopped it: stopping it", "job", jobID, "run", r.id)
		r.stop()
	}
}

func (a *Local) checkGPUs(gpus []int) error {
	n := len(a.cfg.Backend.Devices())
	for _, g := range gpus {
		if g < 0 || g >= n {
			return fmt.Errorf("no GPU %d (the machine has %d)", g, n)
		}
	}
	return nil
}

// Stop ends run ref: SIGTERM, then SIGKILL after the grace period. It
// returns at once; the Exit follows. Stopping a run that is not running
// (it ended, or another run of the job runs) is not an error, and leaves
// any other run alone.
func (a *Local) Stop(ctx context.Context, ref job.RunRef) error {
	a.mu.Lock()
	r, ok := a.runs[ref.Job]
	var stop func()
	if ok && r.id == ref.Run {
		stop = r.stop
	}
	a.mu.Unlock()
	if stop != nil {
		stop()
	}
	return nil
}

// Shutdown stops every run and waits for them to end or ctx to expire,
// and closes the gate.
func (a *Local) Shutdown(ctx context.Context) error {
	if a.gate != nil {
		defer a.gate.Close()
	}
	a.mu.Lock()
	runs := make([]*run, 0, len(a.runs))
	stops := make([]func(), 0, len(a.runs))
	for _, r := range a.runs {
		runs, stops = append(runs, r), append(stops, r.stop)
	}
	a.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	for _, r := range runs {
		select {
		case <-r.done:
		case <-ctx.Done():
			return fmt.Errorf("agent %s shutdown: %w", a.cfg.Name, ctx.Err())
		}
	}
	return nil
}
