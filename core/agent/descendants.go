package agent

import (
	"os"
	"strconv"
	"syscall"
)

// A job's processes that leave its process group (setsid: Jupyter starts
// each kernel in a session of its own) would outlive a stop that signals
// only the group. So a stop also finds the main process's descendants
// outside its group, while they are still its descendants, and signals
// them with the group.

// straggler is a process outside a job's group that descends from it.
type straggler struct {
	pid   int
	start string // its start time (/proc/PID/stat), to never signal a reused PID
}

// stragglers lists the descendants of process root outside group pgid.
func stragglers(root, pgid int) []straggler {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	group := map[int]int{}
	start := map[int]string{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStat(pid)
		if len(f) < 20 {
			continue
		}
		ppid, err1 := strconv.Atoi(f[1])
		g, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil {
			continue
		}
		children[ppid] = append(children[ppid], pid)
		group[pid], start[pid] = g, f[19]
	}
	var out []straggler
	seen := map[int]bool{root: true}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if seen[c] {
				continue
			}
			seen[c] = true
			queue = append(queue, c)
			if group[c] != pgid {
				out = append(out, straggler{pid: c, start: start[c]})
			}
		}
	}
	return out
}

// signal sends sig to the straggler if it is still the same process.
func (s straggler) signal(sig syscall.Signal) {
	if f := procStat(s.pid); len(f) >= 20 && f[19] == s.start {
		_ = syscall.Kill(s.pid, sig)
	}
}
