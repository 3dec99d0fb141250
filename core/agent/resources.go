package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/joboutput"
)

// limits is the agent's per-job enforcement and accounting of CPUs and
// memory.
type limits struct {
	mu   sync.Mutex
	cg   *Cgroups // nil: not enforced, for the reason in why
	why  string
	off  bool // cgroups off in the configuration, not failed
	prof ProfileConfig
	log  *slog.Logger
	jobs map[int64]*limited
}

// limited is one job's part.
type limited struct {
	res     job.Resources
	gpus    int
	procs   jobProcs
	cg      *JobCgroup
	note    string
	started time.Time
	// The previous reading, for the CPU rate.
	lastAt  time.Time
	lastCPU time.Duration
	profile []job.ProfilePoint
	resume  *job.Resume
	// checkpoint reads the run's checkpoint folder, reported with its
	// usage (checkpoint.go); nil: none.
	checkpoint func() job.CheckpointState
	cancel     context.CancelFunc
}

// jobProcs are a job's processes (members): a command's (its process
// group, session and what descends from them: runProcs), or a
// container's (its PID namespace), whose cgroup the runtime made inside
// the job's (inCgroup); neither for a simulated job.
type jobProcs struct {
	pgid      int
	container bool
	inCgroup  bool
	members   func() ([]int, error)
}

// simulated reports whether the job has no processes of its own.
func (p jobProcs) simulated() bool { return p.pgid == 0 && !p.container }

// list lists the job's live processes.
func (p jobProcs) list() ([]int, error) {
	if p.members != nil {
		return p.members()
	}
	return groupMembers(p.pgid)
}

// open makes job jobID's cgroup before its command starts and opens its
// v2 folder, for the command to be born in it; nil without cgroups or
// without a v2 hierarchy (the command is moved in once it runs: begin).
func (l *limits) open(jobID int64) *os.File {
	if l.cg == nil {
		return nil
	}
	cg, err := l.cg.New(jobID)
	if err != nil {
		l.log.Warn("make a job's cgroup", "job", jobID, "err", err)
		return nil
	}
	f, err := cg.Open()
	if err != nil {
		l.log.Warn("open a job's cgroup", "job", jobID, "err", err)
		return nil
	}
	return f
}

// drop removes job jobID's cgroup, made for a run that could not start.
func (l *limits) drop(jobID int64) {
	if l.cg == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), reapTimeout)
	defer cancel()
	if err := l.cg.job(l.cg.name(jobID)).Remove(ctx); err != nil {
		l.log.Warn("remove the cgroup of a job that did not start", "job", jobID, "err", err)
	}
}

// prepare makes job jobID's cgroup before a container of it starts and
// returns its path under the hierarchies' root, for the runtime's
// --cgroup-parent; "" without cgroups. begin sets its limits.
func (l *limits) prepare(jobID int64) string {
	if l.cg == nil {
		return ""
	}
	cg, err := l.cg.New(jobID)
	if err != nil {
		l.log.Warn("make a container job's cgroup", "job", jobID, "err", err)
		return ""
	}
	return "/" + cgroupParent + "/" + filepath.Base(cg.Path())
}

// setup detects cgroups once, when cfg asks for them, and says once why
// limits will not be enforced otherwise.
func (l *limits) setup(cfg Config) {
	l.log, l.prof, l.jobs = cfg.Logger, cfg.Profile, map[int64]*limited{}
	if !cfg.Cgroups {
		// Off by choice: the job page says so, but no job's output or
		// history is told on every run.
		l.why, l.off = "cgroups are off in the agent's configuration", true
		return
	}
	root := cmp.Or(cfg.CgroupRoot, DefaultCgroupRoot)
	cg, err := DetectCgroups(root)
	if err != nil {
		l.why = err.Error()
		l.log.Warn(job.NotEnforcedPrefix+"jobs keep their allocation unenforced", "agent", cfg.Name, "why", l.why)
		return
	}
	cg.agent = agentKey(cfg.Name, cfg.WorkDir)
	l.cg = cg
	l.log.Info("cgroups enforce CPU and memory allocations", "agent", cfg.Name, "version", cg.Version)
	// Job cgroups an earlier process of this agent left (it was killed:
	// its watchdog ended each job's process group, not what left it).
	for _, j := range cg.Stray() {
		ctx, cancel := context.WithTimeout(context.Background(), reapTimeout)
		err := j.Remove(ctx)
		cancel()
		l.log.Warn("ended the processes of a job cgroup an earlier process of this agent left", "cgroup", j.Path(), "err", err)
	}
}

// begin starts accounting for a job that has just started (pgid 0 for a
// simulated one) and puts it in its cgroup with its limits, writing to
// its log why not when that cannot be done. gateIters is the gate's count
// of the job's iterations when it shares (nil otherwise), which its
// profiling phase reads besides its progress lines.
func (l *limits) begin(s job.Spec, procs jobProcs, log io.Writer, logPath string, gateIters IterationSource) {
	j := &limited{gpus: len(s.GPUs), procs: procs, started: time.Now()}
	j.lastAt = j.started
	if s.Resources != nil {
		j.res = *s.Resources
	}
	switch {
	case procs.simulated():
		j.note = "simulated job: CPU and memory use are simulated"
	case procs.container && !procs.inCgroup && l.cg != nil:
		j.note = job.NotEnforcedPrefix + "the container's cgroup could not be made inside the job's"
	case l.cg == nil && l.off:
		j.note = "not enforced: " + l.why
	case l.cg == nil:
		j.note = job.NotEnforcedPrefix + l.why
	default:
		if err := j.enter(l.cg, s.JobID); err != nil {
			j.note = job.NotEnforcedPrefix + err.Error()
		}
	}
	if strings.HasPrefix(j.note, job.NotEnforcedPrefix) && !procs.simulated() && s.Resources != nil {
		fmt.Fprintf(log, "gpuportal: %s\n", j.note)
	}
	if j.cg != nil && j.res.ProfileMaxMilli > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		j.cancel = cancel
		go l.profileJob(ctx, s.JobID, j, logPath, gateIters)
	}
	l.mu.Lock()
	l.jobs[s.JobID] = j
	l.mu.Unlock()
}

// enter makes the job's cgroup, sets its limits and moves its process
// group in.
func (j *limited) enter(cgs *Cgroups, jobID int64) error {
	cg, err := cgs.New(jobID)
	if err != nil {
		return err
	}
	if err := j.apply(cg, j.res); err != nil {
		_ = cg.Release()
		return err
	}
	if j.procs.inCgroup {
		// The runtime made the container's cgroup inside the job's.
		j.cg = cg
		return nil
	}
	if err := cg.Add(j.procs.list); errors.Is(err, errNoProcs) {
		// The first process has already exited: what it left, born in the
		// cgroup, goes when the run's end is seen (end).
	} else if err != nil {
		_ = cg.Release()
		return err
	}
	j.cg = cg
	return nil
}

// apply sets a cgroup's CPU quota (hard: the job only slows) and memory
// limit (soft: SetMemorySoft, the job is never killed for it); 0 lifts
// either.
func (j *limited) apply(cg *JobCgroup, r job.Resources) error {
	if err := cg.SetCPU(r.CPUMilli); err != nil {
		return err
	}
	if r.MemMiB > 0 || j.res.MemMiB > 0 {
		if err := cg.SetMemorySoft(r.MemMiB); err != nil {
			return err
		}
	}
	return nil
}

// end stops accounting for a job whose run ended, ends whatever is left
// of its processes in its cgroup, and removes the cgroup.
func (l *limits) end(jobID int64) {
	l.mu.Lock()
	j := l.jobs[jobID]
	delete(l.jobs, jobID)
	var cancel context.CancelFunc
	if j != nil {
		cancel = j.cancel
	}
	l.mu.Unlock()
	if j == nil {
		return
	}
	if cancel != nil {
		cancel()
	}
	if j.cg != nil {
		ctx, cancel := context.WithTimeout(context.Background(), reapTimeout)
		defer cancel()
		if err := j.cg.Remove(ctx); err != nil {
			l.log.Warn("remove job cgroup", "job", jobID, "err", err)
		}
	}
}

// resize changes a running job's allocation.
func (l *limits) resize(jobID int64, r job.Resources) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.jobs[jobID]
	if j == nil {
		return fmt.Errorf("resize job %d: not running here", jobID)
	}
	r.ProfileMaxMilli, r.PropCPUMilli = j.res.ProfileMaxMilli, j.res.PropCPUMilli
	if j.cg != nil && j.cancel == nil {
		if err := j.apply(j.cg, r); err != nil {
			return fmt.Errorf("resize job %d: %w", jobID, err)
		}
	}
	j.res = r
	return nil
}

// usage reads every job's use since the previous reading.
// setCheckpoint keeps what a job's run resumed from, and how to read its
// checkpoint folder, for its usage.
func (l *limits) setCheckpoint(jobID int64, r *job.Resume, folder func() job.CheckpointState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if j := l.jobs[jobID]; j != nil {
		j.resume, j.checkpoint = r, folder
	}
}

func (l *limits) usage(now time.Time) []job.Usage {
	out, folders := l.readUsage(now)
	// The folders are walked without the lock.
	for i, f := range folders {
		if f != nil {
			st := f()
			out[i].Checkpoint = &st
		}
	}
	return out
}

// readUsage reads every job's use since the previous reading, sorted by
// job, and how to read the checkpoint folder of each (nil: none).
func (l *limits) readUsage(now time.Time) ([]job.Usage, []func() job.CheckpointState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]job.Usage, 0, len(l.jobs))
	for id, j := range l.jobs {
		u := job.Usage{JobID: id, At: now, CPUMilli: j.res.CPUMilli, MemMiB: j.res.MemMiB,
			Enforced: j.cg != nil, Note: j.note, Profile: j.profile, Resume: j.resume}
		var cpu time.Duration
		var mem int64
		var err error
		switch {
		case j.cg != nil:
			var cu CgroupUsage
			if cu, err = j.cg.Usage(); err == nil {
				cpu, mem = time.Duration(cu.CPUUsec)*time.Microsecond, max(cu.MemBytes, 0)>>20
				// Pages a process touched before it joined the cgroup stay
				// charged elsewhere: its resident set is the floor.
				if _, rss, perr := groupUsage(j.procs.list); perr == nil {
					mem = max(mem, rss)
				}
			}
		case !j.procs.simulated():
			cpu, mem, err = groupUsage(j.procs.list)
		default:
			u.UsedCPUMilli, u.UsedMemMiB = simUsage(id, j, now)
			out = append(out, u)
			continue
		}
		if err == nil {
			if dt := now.Sub(j.lastAt); dt > 0 && cpu >= j.lastCPU {
				u.UsedCPUMilli = int64(float64(cpu-j.lastCPU) / float64(dt) * 1000)
			}
			j.lastAt, j.lastCPU = now, cpu
			u.UsedMemMiB = mem
		}
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b job.Usage) int { return int(a.JobID - b.JobID) })
	folders := make([]func() job.CheckpointState, len(out))
	for i, u := range out {
		if j := l.jobs[u.JobID]; j != nil {
			folders[i] = j.checkpoint
		}
	}
	return out, folders
}

// simUsage is a simulated job's plausible use: most of its allocation
// (or of a core per GPU without one), moving slowly over time the way a
// data loader's does.
func simUsage(id int64, j *limited, now time.Time) (cpuMilli, memMiB int64) {
	cpu := j.res.CPUMilli
	if cpu <= 0 {
		cpu = 1000 * int64(max(j.gpus, 1))
	}
	mem := j.res.MemMiB
	if mem <= 0 {
		mem = 8192 * int64(max(j.gpus, 1))
	}
	t := now.Sub(j.started).Seconds()
	wave := math.Abs(math.Sin(float64(id) + t/90))
	return int64(float64(cpu) * (0.55 + 0.4*wave)), int64(float64(mem) * (0.45 + 0.25*math.Min(1, t/600)))
}

// clockTicks is the kernel's USER_HZ, which /proc/PID/stat counts in: 100
// on every Linux architecture gpuportal runs on.
const clockTicks = 100

// groupUsage sums the CPU time and resident memory of a job's live
// processes (list) from /proc (time of exited children is lost).
func groupUsage(list func() ([]int, error)) (cpu time.Duration, memMiB int64, err error) {
	pids, err := list()
	if err != nil {
		return 0, 0, err
	}
	page := int64(os.Getpagesize())
	var ticks, pages int64
	for _, pid := range pids {
		f := procStat(pid)
		if len(f) < 22 { // gone meanwhile, or unreadable
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		rss, _ := strconv.ParseInt(f[21], 10, 64)
		ticks += ut + st
		pages += rss
	}
	return time.Duration(ticks) * time.Second / clockTicks, pages * page >> 20, nil
}

// profileJob runs the profiling phase of a job (ProfileCPU), counting its
// iterations at the gate (gateIters, nil for a job that does not share)
// or from the progress lines it prints (tailing its log), whichever
// reports first, and keeps the curve for the server. Then the job goes
// back to its allocation.
func (l *limits) profileJob(ctx context.Context, jobID int64, j *limited, logPath string, gateIters IterationSource) {
	counter := &ProgressCounter{}
	tailCtx, stopTail := context.WithCancel(ctx)
	defer stopTail()
	go tailLog(tailCtx, logPath, counter)
	var src IterationSource = counter
	skipped := "CPU profiling skipped: the job printed no " + ProgressPrefix + " line"
	if gateIters != nil {
		src = &FirstIterations{Sources: []IterationSource{gateIters, counter}}
		skipped = "CPU profiling skipped: the job finished no iteration at the gate and printed no " + ProgressPrefix + " line"
	}
	// Profiling starts once the job reports progress (it may load data
	// first); a job that never does is not profiled.
	if !waitProgress(ctx, src, profileStartWait) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if ctx.Err() == nil {
			j.cancel() // releases the context; the job goes on
			j.cancel = nil
			j.note = skipped
		}
		return
	}
	l.mu.Lock()
	cfg := l.prof
	cfg.PropMilli = max(j.res.PropCPUMilli, j.res.CPUMilli)
	cfg.MaxMilli = j.res.ProfileMaxMilli
	cg := j.cg
	l.mu.Unlock()
	prof, err := ProfileCPU(ctx, cg, src, cfg)
	l.mu.Lock()
	defer l.mu.Unlock()
	if ctx.Err() != nil {
		return // the job ended
	}
	j.cancel() // releases the context; the job goes on
	j.cancel = nil
	if err := j.apply(cg, j.res); err != nil {
		l.log.Warn("restore job's CPU allocation after profiling", "job", jobID, "err", err)
	}
	if err != nil {
		l.log.Info("CPU profiling gave up", "job", jobID, "err", err)
		j.note = "CPU profiling gave up: " + err.Error()
		return
	}
	j.profile = prof.Points
	l.log.Info("CPU profile measured", "job", jobID, "points", len(prof.Points), "took", prof.Elapsed.Round(time.Second))
}

// tailLog feeds what is appended to the file at path to w until ctx ends.
func tailLog(ctx context.Context, path string, w io.Writer) {
	f, err := joboutput.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return
	}
	buf := make([]byte, 32<<10)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		for {
			n, err := f.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
			}
			if err != nil || n == 0 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// JobUsage reports every running job's CPU and memory use on this
// machine against its allocation.
func (a *Local) JobUsage(now time.Time) []job.Usage { return a.lim.usage(now) }

// Resize changes a running job's CPU and memory allocation, enforced
// where its cgroup is (not while it is being profiled: the new limits
// apply when profiling ends).
func (a *Local) Resize(_ context.Context, jobID int64, r job.Resources) error {
	return a.lim.resize(jobID, r)
}

// profileStartWait is how long profiling waits for a job's first progress
// line.
const profileStartWait = 10 * time.Minute

// waitProgress waits until src has seen a progress line, for at most d.
func waitProgress(ctx context.Context, src IterationSource, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, ok := src.Iterations(); ok {
			return true
		}
		if sleepCtx(ctx, 200*time.Millisecond) != nil {
			return false
		}
	}
	return false
}

// resize changes a running job's allocation as the server asks.
func (s *session) resize(ctx context.Context, r *wire.Resize) error {
	n := s.c.nodes[r.Node]
	if n == nil {
		return fmt.Errorf("no node %q on this agent", r.Node)
	}
	return n.Resize(ctx, r.JobID, *r.Resources.Resources())
}
