package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultCgroupRoot is where the kernel's cgroup file systems are mounted.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// cgroupParent is the folder, under each hierarchy, that holds the job
// cgroups this agent makes: ROOT/gpuportal/job-ID-AGENT (Cgroups.New).
const cgroupParent = "gpuportal"

// ErrCgroupsUnavailable is wrapped by DetectCgroups when this machine's
// cgroups cannot be written (no cgroup file system, no permission, no CPU
// controller): jobs then keep the proportional share, unenforced.
var ErrCgroupsUnavailable = errors.New("cgroups not writable")

// Cgroups makes per-job cgroups on one machine, through cgroup v2 where
// the unified hierarchy has the cpu controller, else through the v1 cpu,
// cpuacct and memory hierarchies (hybrid hosts and many containers).
//
// A job's cgroup also holds its processes to the job: when its run ends,
// every process in it is killed (JobCgroup.Remove), wherever it moved in
// its session or process group. Under v2 the kernel kills them
// (cgroup.kill) and a command's first process is born inside
// (CLONE_INTO_CGROUP), so not even its first fork escapes. Under v1 the
// v2 hierarchy of a hybrid host ("unified") does the same where it can be
// written; else the v1 freezer stops the job's processes while each is
// killed.
type Cgroups struct {
	// Version is 2 or 1.
	Version int
	// dirs are the parent folders to make job cgroups in, one per
	// hierarchy, by controller ("cpu", "cpuacct", "memory"); under v2 all
	// three name the same folder. Under v1 they may also hold "freezer"
	// and "unified", the v2 hierarchy of a hybrid host, without
	// controllers: both only hold and end the job's processes.
	dirs map[string]string
	// agent ends the names of this agent's job cgroups (agentKey), so
	// that two agents on one machine never share, or kill, each other's.
	agent string
}

// trackers are the hierarchies of a v1 host that only hold a job's
// processes, to end them: no limit is set there.
var trackers = []string{"freezer", "unified"}

// agentKey names an agent's cgroups: 8 hex digits of a hash of its
// machine's name and work folder (as agentLabel names its containers).
func agentKey(name, workDir string) string {
	sum := sha256.Sum256([]byte(name + "@" + workDir))
	return hex.EncodeToString(sum[:4])
}

// DetectCgroups finds a writable cgroup hierarchy under root (normally
// DefaultCgroupRoot), makes the agent's parent folder there and checks
// that a child can be made and removed. The error wraps
// ErrCgroupsUnavailable and says why, for the agent to log once before it
// falls back to proportional shares.
func DetectCgroups(root string) (*Cgroups, error) {
	var why []string
	if c, err := detectV2(root); err == nil {
		return c, nil
	} else {
		why = append(why, "v2: "+err.Error())
	}
	if c, err := detectV1(root); err == nil {
		return c, nil
	} else {
		why = append(why, "v1: "+err.Error())
	}
	return nil, fmt.Errorf("%w under %s (%s)", ErrCgroupsUnavailable, root, strings.Join(why, "; "))
}

func detectV2(root string) (*Cgroups, error) {
	ctrl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("no unified hierarchy: %w", err)
	}
	have := strings.Fields(string(ctrl))
	if !slices.Contains(have, "cpu") {
		return nil, fmt.Errorf("the unified hierarchy has no cpu controller (it has %q)", strings.TrimSpace(string(ctrl)))
	}
	enable := "+cpu"
	if slices.Contains(have, "memory") {
		enable += " +memory"
	}
	parent := filepath.Join(root, cgroupParent)
	if err := writeFile(filepath.Join(root, "cgroup.subtree_control"), enable); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("make %s: %w", parent, err)
	}
	if err := writeFile(filepath.Join(parent, "cgroup.subtree_control"), enable); err != nil {
		return nil, err
	}
	if err := probe(parent); err != nil {
		return nil, err
	}
	return &Cgroups{Version: 2, dirs: map[string]string{"cpu": parent, "cpuacct": parent, "memory": parent}}, nil
}

func detectV1(root string) (*Cgroups, error) {
	c := &Cgroups{Version: 1, dirs: map[string]string{}}
	for _, ctl := range []string{"cpu", "cpuacct", "memory"} {
		base := filepath.Join(root, ctl)
		if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
			continue
		}
		parent := filepath.Join(base, cgroupParent)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			if ctl == "cpu" {
				return nil, fmt.Errorf("make %s: %w", parent, err)
			}
			continue
		}
		if err := probe(parent); err != nil {
			if ctl == "cpu" {
				return nil, err
			}
			continue
		}
		c.dirs[ctl] = parent
	}
	if c.dirs["cpu"] == "" {
		return nil, fmt.Errorf("no cpu hierarchy at %s", filepath.Join(root, "cpu"))
	}
	// The freezer, and a hybrid host's v2 hierarchy, where they can be
	// written: they end a job's processes (JobCgroup.Kill).
	for _, t := range trackers {
		base := filepath.Join(root, t)
		file := "cgroup.procs"
		if t == "unified" {
			file = "cgroup.controllers" // a cgroup2 file system, not a v1 hierarchy
		}
		if _, err := os.Stat(filepath.Join(base, file)); err != nil {
			continue
		}
		parent := filepath.Join(base, cgroupParent)
		if os.MkdirAll(parent, 0o755) == nil && probe(parent) == nil {
			c.dirs[t] = parent
		}
	}
	return c, nil
}

// probe makes and removes a child of parent.
func probe(parent string) error {
	p := filepath.Join(parent, fmt.Sprintf("probe-%d", os.Getpid()))
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("make a cgroup in %s: %w", parent, err)
	}
	if err := os.Remove(p); err != nil {
		return fmt.Errorf("remove probe cgroup %s: %w", p, err)
	}
	return nil
}

func writeFile(path, value string) error {
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("write %q to %s: %w", value, path, err)
	}
	return nil
}

// JobCgroup is one job's cgroup (one folder per hierarchy under v1).
type JobCgroup struct {
	version int
	dirs    map[string]string // by controller, and trackers under v1
}

// name is the folder name of job jobID's cgroup: job-ID, and this
// agent's key when it has one (job-ID-KEY).
func (c *Cgroups) name(jobID int64) string {
	if c.agent == "" {
		return fmt.Sprintf("job-%d", jobID)
	}
	return fmt.Sprintf("job-%d-%s", jobID, c.agent)
}

// New makes the cgroup of a job; a leftover one from an earlier run of the
// same job is reused.
func (c *Cgroups) New(jobID int64) (*JobCgroup, error) {
	j := c.job(c.name(jobID))
	for _, d := range j.dirs {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("make cgroup for job %d: %w", jobID, err)
		}
	}
	return j, nil
}

// job is the cgroup named name in each hierarchy, made or not.
func (c *Cgroups) job(name string) *JobCgroup {
	j := &JobCgroup{version: c.Version, dirs: map[string]string{}}
	for ctl, parent := range c.dirs {
		j.dirs[ctl] = filepath.Join(parent, name)
	}
	return j
}

// Stray lists this agent's job cgroups (by its key) that exist now: at
// its start, those an earlier process of it left, whose processes its
// watchdog may have left running (setsid daemons).
func (c *Cgroups) Stray() []*JobCgroup {
	if c.agent == "" {
		return nil
	}
	ents, err := os.ReadDir(c.dirs["cpu"])
	if err != nil {
		return nil
	}
	var out []*JobCgroup
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "job-") && strings.HasSuffix(e.Name(), "-"+c.agent) {
			out = append(out, c.job(e.Name()))
		}
	}
	return out
}

// Path is the job's cgroup folder in the cpu hierarchy.
func (j *JobCgroup) Path() string { return j.dirs["cpu"] }

// v2Dir is the job's cgroup in a v2 hierarchy, the host's or a hybrid
// host's "unified" one; "" where there is none.
func (j *JobCgroup) v2Dir() string {
	if j.version == 2 {
		return j.dirs["cpu"]
	}
	return j.dirs["unified"]
}

// Open opens the job's v2 cgroup folder, for a command to be born in it
// (syscall.SysProcAttr.CgroupFD); nil where the job has none.
func (j *JobCgroup) Open() (*os.File, error) {
	d := j.v2Dir()
	if d == "" {
		return nil, nil
	}
	f, err := os.Open(d)
	if err != nil {
		return nil, fmt.Errorf("open cgroup %s: %w", d, err)
	}
	return f, nil
}

// unique lists the job's folders, each once, sorted.
func (j *JobCgroup) unique() []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range j.dirs {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// errNoProcs: a job's processes have all exited (or hidden) before they
// could be moved into its cgroup.
var errNoProcs = errors.New("the job has no processes left")

// Add moves the processes that list lists (a job's) into the cgroup.
// Processes they fork afterwards are born inside it. It lists them twice
// so that children forked during the first pass are caught too.
func (j *JobCgroup) Add(list func() ([]int, error)) error {
	for range 2 {
		pids, err := list()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return errNoProcs
		}
		for _, d := range j.unique() {
			for _, pid := range pids {
				err := writeFile(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid))
				if err != nil && !errors.Is(err, os.ErrNotExist) && !isESRCH(err) {
					return fmt.Errorf("add process %d: %w", pid, err)
				}
			}
		}
	}
	return nil
}

// procStat returns the fields of /proc/PID/stat after "pid (comm)", so
// that f[0] is the state, f[2] the process group, f[11] and f[12] utime
// and stime, f[21] rss; nil when the process is gone. comm may hold
// spaces and ')'.
func procStat(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

func isESRCH(err error) bool { return strings.Contains(err.Error(), "no such process") }

// groupMembers lists the processes whose process group is pgid.
func groupMembers(pgid int) ([]int, error) {
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
		f := procStat(pid)
		if len(f) >= 3 {
			if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
				out = append(out, pid)
			}
		}
	}
	return out, nil
}

// cfsPeriodUS is the CPU quota period: 100 ms, the kernel's default.
const cfsPeriodUS = 100000

// SetCPU limits the job to milli thousandths of a core (cpu.max under v2,
// cpu.cfs_quota_us under v1); 0 or less lifts the limit.
func (j *JobCgroup) SetCPU(milli int64) error {
	d := j.dirs["cpu"]
	quota := int64(-1)
	if milli > 0 {
		quota = max(milli*cfsPeriodUS/1000, 1000) // the kernel's least is 1 ms
	}
	if j.version == 2 {
		v := "max " + strconv.Itoa(cfsPeriodUS)
		if quota > 0 {
			v = fmt.Sprintf("%d %d", quota, cfsPeriodUS)
		}
		return writeFile(filepath.Join(d, "cpu.max"), v)
	}
	if err := writeFile(filepath.Join(d, "cpu.cfs_period_us"), strconv.Itoa(cfsPeriodUS)); err != nil {
		return err
	}
	return writeFile(filepath.Join(d, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10))
}

// SetMemory limits the job's memory to mib MiB (memory.max under v2,
// memory.limit_in_bytes under v1); 0 or less lifts the limit. Without a
// memory hierarchy it fails.
func (j *JobCgroup) SetMemory(mib int64) error {
	return j.setMemory("memory.max", "memory.limit_in_bytes", mib)
}

// SetMemorySoft asks the kernel to hold the job to mib MiB without ever
// killing it for memory: memory.high under v2 (above it the job's page
// cache is reclaimed and its allocations throttled),
// memory.soft_limit_in_bytes under v1 (reclaimed to it first when the
// machine runs short); 0 or less lifts it. This is how the agent enforces
// a memory allocation: the sensitivity curves say what speeds a job up,
// not what it needs to survive. Without a memory hierarchy it fails.
func (j *JobCgroup) SetMemorySoft(mib int64) error {
	return j.setMemory("memory.high", "memory.soft_limit_in_bytes", mib)
}

// setMemory writes mib MiB, or no limit when mib <= 0, to the memory
// controller's file v2 or v1, whichever hierarchy the job has.
func (j *JobCgroup) setMemory(v2, v1 string, mib int64) error {
	d, ok := j.dirs["memory"]
	if !ok {
		return fmt.Errorf("set memory limit: %w: no memory controller", ErrCgroupsUnavailable)
	}
	file, v := v1, "-1"
	if j.version == 2 {
		file, v = v2, "max"
	}
	if mib > 0 {
		v = strconv.FormatInt(mib<<20, 10)
	}
	return writeFile(filepath.Join(d, file), v)
}

// CgroupUsage is what a job's cgroup has used.
type CgroupUsage struct {
	// CPUUsec is CPU time used since the cgroup was made, microseconds.
	CPUUsec int64
	// MemBytes is memory in use now; -1 when no memory hierarchy.
	MemBytes int64
}

// Usage reads cpu.stat and memory.current (v2), or cpuacct.usage and
// memory.usage_in_bytes (v1).
func (j *JobCgroup) Usage() (CgroupUsage, error) {
	u := CgroupUsage{MemBytes: -1}
	if j.version == 2 {
		b, err := os.ReadFile(filepath.Join(j.dirs["cpu"], "cpu.stat"))
		if err != nil {
			return u, fmt.Errorf("read cpu usage: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				u.CPUUsec, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
		if m, err := readInt(filepath.Join(j.dirs["memory"], "memory.current")); err == nil {
			u.MemBytes = m
		}
		return u, nil
	}
	d, ok := j.dirs["cpuacct"]
	if !ok {
		return u, fmt.Errorf("read cpu usage: no cpuacct hierarchy")
	}
	ns, err := readInt(filepath.Join(d, "cpuacct.usage"))
	if err != nil {
		return u, fmt.Errorf("read cpu usage: %w", err)
	}
	u.CPUUsec = ns / 1000
	if md, ok := j.dirs["memory"]; ok {
		if m, err := readInt(filepath.Join(md, "memory.usage_in_bytes")); err == nil {
			u.MemBytes = m
		}
	}
	return u, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}

// Remove ends the job's processes (Kill), then removes the cgroup's
// folders, with those a container runtime made inside them (a
// container's, its monitor's). Processes it could not end within ctx
// keep their cgroup, which is then not removed: the error says so.
func (j *JobCgroup) Remove(ctx context.Context) error {
	kerr := j.Kill(ctx)
	var errs []error
	for _, d := range j.unique() {
		errs = append(errs, removeCgroupTree(d, ""))
	}
	if kerr != nil {
		return errors.Join(append([]error{kerr}, errs...)...)
	}
	return errors.Join(errs...)
}

// Release moves the job's processes to each hierarchy's root and removes
// the cgroup: for a job that goes on unenforced when its cgroup could not
// be set up.
func (j *JobCgroup) Release() error {
	var errs []error
	for _, d := range j.unique() {
		root := filepath.Dir(filepath.Dir(d)) // ROOT/gpuportal/job-ID -> ROOT
		errs = append(errs, removeCgroupTree(d, root))
	}
	return errors.Join(errs...)
}

// removeCgroupTree removes cgroup folder d and the cgroups below it,
// deepest first, moving their processes to root, unless root is "".
func removeCgroupTree(d, root string) error {
	var errs []error
	if ents, err := os.ReadDir(d); err == nil {
		for _, e := range ents {
			if e.IsDir() {
				errs = append(errs, removeCgroupTree(filepath.Join(d, e.Name()), root))
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil && root != "" {
		for _, pid := range strings.Fields(string(b)) {
			_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(pid), 0o644)
		}
	}
	if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
	}
	return errors.Join(errs...)
}

// killPoll is how often Kill looks whether the job's processes are gone.
const killPoll = 20 * time.Millisecond

// Kill ends every process in the job's cgroup and in the cgroups below
// it, and waits until none is left or ctx ends. Under v2 the kernel kills
// them all at once (cgroup.kill, Linux 5.14), or they are frozen
// (cgroup.freeze), each killed, then thawed; under v1 the freezer
// hierarchy freezes them the same way. Whatever is left in any hierarchy
// (no freezer, or a process added meanwhile) is killed one by one, again
// until none is left: a process cannot leave its cgroup unless it is
// root.
func (j *JobCgroup) Kill(ctx context.Context) error {
	for {
		if d := j.v2Dir(); d != "" {
			if writeFile(filepath.Join(d, "cgroup.kill"), "1") != nil {
				freezeKill(ctx, d, 2)
			}
		}
		if d, ok := j.dirs["freezer"]; ok {
			freezeKill(ctx, d, 1)
		}
		left := j.procs()
		if len(left) == 0 {
			return nil
		}
		killPIDs(left)
		select {
		case <-ctx.Done():
			return fmt.Errorf("end the processes of cgroup %s: %d left (%v): %w", j.Path(), len(left), left[:min(len(left), 8)], ctx.Err())
		case <-time.After(killPoll):
		}
	}
}

// procs lists the processes in the job's cgroups and those below them,
// in every hierarchy, never the agent itself.
func (j *JobCgroup) procs() []int {
	seen := map[int]bool{}
	var out []int
	for _, d := range j.unique() {
		for _, pid := range treeProcs(d) {
			if !seen[pid] {
				seen[pid] = true
				out = append(out, pid)
			}
		}
	}
	slices.Sort(out)
	return out
}

// treeProcs lists the processes of cgroup d and the cgroups below it.
func treeProcs(d string) []int {
	var out []int
	if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
				out = append(out, pid)
			}
		}
	}
	if ents, err := os.ReadDir(d); err == nil {
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, treeProcs(filepath.Join(d, e.Name()))...)
			}
		}
	}
	return out
}

// killPIDs sends each process SIGKILL.
func killPIDs(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// freezeWait is how long freezeKill waits for a cgroup to freeze; past
// it, the processes are killed anyway.
const freezeWait = 2 * time.Second

// freezeKill freezes cgroup d (version 2: cgroup.freeze, 1: the v1
// freezer's freezer.state), so that none of its processes can fork while
// they are killed, sends each SIGKILL, and thaws it for them to die.
func freezeKill(ctx context.Context, d string, version int) {
	file, freeze, thaw := "freezer.state", "FROZEN", "THAWED"
	if version == 2 {
		file, freeze, thaw = "cgroup.freeze", "1", "0"
	}
	if writeFile(filepath.Join(d, file), freeze) == nil {
		defer func() { _ = writeFile(filepath.Join(d, file), thaw) }()
		wctx, cancel := context.WithTimeout(ctx, freezeWait)
		for !frozen(d, version) && sleepCtx(wctx, killPoll) == nil {
		}
		cancel()
	}
	killPIDs(treeProcs(d))
}

// frozen reports whether cgroup d has frozen.
func frozen(d string, version int) bool {
	if version == 2 {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.events"))
		return err == nil && slices.Contains(strings.Split(string(b), "\n"), "frozen 1")
	}
	b, err := os.ReadFile(filepath.Join(d, "freezer.state"))
	return err == nil && strings.TrimSpace(string(b)) == "FROZEN"
}
