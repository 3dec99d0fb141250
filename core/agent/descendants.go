package agent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// A command run's processes, found without cgroups. The run's first
// process leads its own session and process group (startProcess), but
// its children may leave both: setsid (Jupyter starts each kernel in a
// session of its own, daemons detach), setpgid, a double fork that
// leaves an orphan to init. So a run's processes are, besides its
// session and group, every descendant of one of them, and every process
// of the run's account started since the run whose environment names the
// run (its GPUPORTAL_CHECKPOINT_DIR, unique to the job on this agent, and
// its GPUPORTAL_RUN): an orphan that left the session keeps its
// environment.
//
// What this cannot find, and only a cgroup catches (cgroup.go): a process
// that left the session and the group, whose parent has exited (an
// orphan), and that runs with another environment (env -i, or a program
// that rewrites its own). Nor does it follow a process that becomes
// another account (su, a setuid program that changes its real user).
// Processes handed to another service (cron, at, systemd-run, ssh to the
// same machine) are that service's, with or without cgroups.

// proc is one process, as /proc shows it.
type proc struct {
	pid, ppid, pgid, sid int
	state                string // R, S, Z, ...
	start                uint64 // clock ticks after boot: with pid, one process
}

// procsNow lists the machine's processes.
func procsNow() ([]proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	out := make([]proc, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// readProc reads process pid; false when it is gone.
func readProc(pid int) (proc, bool) {
	f := procStat(pid)
	if len(f) < 20 {
		return proc{}, false
	}
	p := proc{pid: pid, state: f[0]}
	var err error
	for _, v := range []struct {
		dst *int
		s   string
	}{{&p.ppid, f[1]}, {&p.pgid, f[2]}, {&p.sid, f[3]}} {
		if *v.dst, err = strconv.Atoi(v.s); err != nil {
			return proc{}, false
		}
	}
	if p.start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return proc{}, false
	}
	return p, true
}

// runProcs names one command run's processes.
type runProcs struct {
	leader int    // the run's first process: its session and process group
	uid    int    // the account the run runs as
	since  uint64 // clock ticks after boot, a little before the run started
	// marks are variables, NAME=VALUE, that the run's environment has and
	// no other run's has all of.
	marks []string
}

// find lists the run's live processes (zombies aside), never the agent.
func (r runProcs) find() ([]proc, error) {
	all, err := procsNow()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	children := map[int][]proc{}
	var out []proc
	in := map[int]bool{}
	for _, p := range all {
		children[p.ppid] = append(children[p.ppid], p)
		if p.pid <= 1 || p.pid == self || p.state == "Z" {
			continue
		}
		// Every process of the run started after it; the first one leads
		// the session and the group (pid == pgid == sid).
		if p.start < r.since {
			continue
		}
		ours := p.pgid == r.leader || p.sid == r.leader
		if realUID(p.pid) != r.uid {
			continue
		}
		if ours || r.marked(p.pid) {
			out = append(out, p)
			in[p.pid] = true
		}
	}
	// Their descendants, whatever session, group or account.
	for i := 0; i < len(out); i++ {
		for _, c := range children[out[i].pid] {
			if !in[c.pid] && c.pid != self && c.state != "Z" {
				in[c.pid] = true
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b proc) int { return a.pid - b.pid })
	return out, nil
}

// pids lists the run's live processes by ID, for accounting and cgroups.
func (r runProcs) pids() ([]int, error) {
	ps, err := r.find()
	if err != nil {
		return nil, err
	}
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.pid
	}
	return out, nil
}

// marked reports whether process pid's environment holds all of r's
// marks.
func (r runProcs) marked(pid int) bool {
	if len(r.marks) == 0 {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return false
	}
	vars := bytes.Split(b, []byte{0})
	for _, m := range r.marks {
		if !slices.ContainsFunc(vars, func(v []byte) bool { return string(v) == m }) {
			return false
		}
	}
	return true
}

// signal sends sig to the run's processes: its process group at once
// (while it has one: a group's ID is free again once it is empty), then
// each process found; it returns what it found.
func (r runProcs) signal(sig syscall.Signal) []proc {
	ps, _ := r.find()
	if slices.ContainsFunc(ps, func(p proc) bool { return p.pgid == r.leader }) {
		_ = syscall.Kill(-r.leader, sig)
	}
	for _, p := range ps {
		p.signal(sig)
	}
	return ps
}

// reap kills the run's processes until none is left, or ctx ends.
func (r runProcs) reap(ctx context.Context) error {
	for {
		ps := r.signal(syscall.SIGKILL)
		if len(ps) == 0 {
			return nil
		}
		if err := sleepCtx(ctx, killPoll); err != nil {
			return fmt.Errorf("end the processes of process group %d: %d left (%v): %w", r.leader, len(ps), ps[:min(len(ps), 8)], err)
		}
	}
}

// signal sends sig to the process if it is still the same one (its start
// time): a process handle taken first (a pidfd where the kernel has
// them), checked, then signalled, never signals a reused process ID.
func (p proc) signal(sig syscall.Signal) {
	h, err := os.FindProcess(p.pid)
	if err != nil {
		return
	}
	defer h.Release()
	if now, ok := readProc(p.pid); ok && now.start == p.start {
		_ = h.Signal(sig)
	}
}

// realUID is the real user of process pid; -1 when it is gone.
func realUID(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				if uid, err := strconv.Atoi(f[0]); err == nil {
					return uid
				}
			}
		}
	}
	return -1
}

// bootTicks is the time since boot in clock ticks (/proc/uptime): a
// process started after now has a start time at least this.
func bootTicks() (uint64, error) {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0, fmt.Errorf("read uptime: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("read uptime: %q", b)
	}
	sec, frac, _ := strings.Cut(f[0], ".")
	s, err := strconv.ParseUint(sec, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read uptime: %q", b)
	}
	ticks := s * clockTicks
	if len(frac) >= 2 {
		if h, err := strconv.ParseUint(frac[:2], 10, 64); err == nil {
			ticks += h * clockTicks / 100
		}
	}
	return ticks - min(ticks, 1), nil // rounded down, and a tick's margin
}
