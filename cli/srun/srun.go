// Package srun is Slurm's srun inside a gpuportal job: the program the
// agent gives jobs under that name (gpuportal's binary started as srun,
// and cmd/gpuportal-srun, static, for container jobs).
package srun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/spf13/pflag"
)

// Slurm's srun inside a gpuportal job (docs/slurm.md, "srun"). The agent
// puts its own binary first on a command job's PATH under the name srun
// (core/agent/srun.go). A gpuportal job already runs as a Slurm step's
// tasks run: its command once a machine, or once a GPU with a process per
// GPU, each with its SLURM_PROCID. So "srun CMD" in a batch script runs
// CMD as this task, in its place; options that ask for fewer tasks run
// it on the first of them only, options that ask for more start several
// from this one (as run-tasks does), each with its rank.

// srunOptions are the options of srun that choose its tasks; 0: not given.
type srunOptions struct {
	ntasks, nodes, perNode int
	chdir                  string
}

// slurmTask is the task a process of a job is, from its environment
// (job.SlurmEnv).
type slurmTask struct {
	procID, localID, nodeID int
	ntasks, nnodes, perNode int
}

// srunPlan is what srun does in one task: nothing (skip, and why), run
// the command in its place with env added (tasks.N 0), or start tasks.
type srunPlan struct {
	skip  string
	env   []string
	tasks agent.Tasks
}

// srunIgnored are srun's options that gpuportal's scheduler or agent
// already decided (CPUs, memory, GPUs, binding, the job's name): accepted
// and without effect, as the options of #SBATCH lines that gpuportal
// ignores. They take a value unless listed in srunIgnoredBool.
var srunIgnored = map[string]string{
	"cpus-per-task": "c", "gpus": "G", "gpus-per-node": "", "gpus-per-task": "", "gres": "", "mem": "",
	"mem-per-cpu": "", "mem-per-gpu": "", "cpus-per-gpu": "", "cpu-bind": "", "gpu-bind": "", "mpi": "",
	"job-name": "J", "export": "", "partition": "p", "time": "t", "distribution": "m", "account": "A",
	"qos": "q", "wait": "W", "signal": "", "hint": "", "threads-per-core": "", "constraint": "C", "comment": "",
}

var srunIgnoredBool = map[string]string{
	"label": "l", "unbuffered": "u", "exclusive": "", "overlap": "", "quiet": "Q", "verbose": "v",
	"no-kill": "k", "overcommit": "O", "kill-on-bad-exit": "K",
}

// srunRefused are options that would run the step otherwise than asked:
// their short forms and what to do instead.
var srunRefused = map[string]struct{ short, why string }{
	"output":   {"o", "redirect the step's output in the script (srun CMD > FILE)"},
	"error":    {"e", "redirect the step's errors in the script (srun CMD 2> FILE)"},
	"input":    {"i", "redirect the step's input in the script (srun CMD < FILE)"},
	"pty":      {"", "open a terminal session in the portal"},
	"nodelist": {"w", "the scheduler chose the job's machines: leave it out"},
	"jobid":    {"", "srun runs inside its own job only"},
}

// Name is the name under which gpuportal's binary is srun (main).
const Name = agent.SrunCommand

// Main is srun inside a job: it runs args (OPTIONS... COMMAND...) and
// returns the exit code, having said why on stderr where it ran nothing.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	o, argv, err := parseSrun(args)
	if err != nil {
		fmt.Fprintf(stderr, "srun: error: %v\n", err)
		return 1
	}
	t, err := slurmTaskOf(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "srun: error: %v\n", err)
		return 1
	}
	if o.ntasks == 0 && o.perNode == 0 {
		o.perNode = allocatedPerNode(os.Getenv(TasksVar))
	}
	p, err := planSrun(o, t)
	if err != nil {
		fmt.Fprintf(stderr, "srun: error: %v\n", err)
		return 1
	}
	if p.skip != "" {
		fmt.Fprintf(stderr, "srun: %s\n", p.skip)
		return 0
	}
	if o.chdir != "" {
		if err := os.Chdir(o.chdir); err != nil {
			fmt.Fprintf(stderr, "srun: error: --chdir: %v\n", err)
			return 1
		}
	}
	if p.tasks.N > 0 {
		return agent.RunTasks(ctx, p.tasks, argv, agent.TasksGrace, stderr)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(stderr, "srun: error: %v\n", err)
		return 127
	}
	err = syscall.Exec(path, argv, job.MergeEnv(os.Environ(), p.env))
	fmt.Fprintf(stderr, "srun: error: run %s: %v\n", path, err)
	return 126
}

// parseSrun reads srun's options, up to the command.
func parseSrun(args []string) (srunOptions, []string, error) {
	var o srunOptions
	fs := pflag.NewFlagSet("srun", pflag.ContinueOnError)
	fs.SetInterspersed(false) // the command's own options are its
	fs.SetOutput(io.Discard)
	fs.IntVarP(&o.ntasks, "ntasks", "n", 0, "")
	nodes := fs.StringP("nodes", "N", "", "")
	fs.IntVar(&o.perNode, "ntasks-per-node", 0, "")
	fs.StringVarP(&o.chdir, "chdir", "D", "", "")
	for name, short := range srunIgnored {
		fs.StringP(name, short, "", "")
	}
	for name, short := range srunIgnoredBool {
		fs.BoolP(name, short, false, "")
	}
	for name, r := range srunRefused {
		if name == "pty" {
			fs.BoolP(name, r.short, false, "")
		} else {
			fs.StringP(name, r.short, "", "")
		}
	}
	if err := fs.Parse(args); err != nil {
		return o, nil, fmt.Errorf("%w (gpuportal's srun takes -n, -N, --ntasks-per-node, -D and ignores Slurm's resource options: docs/slurm.md)", err)
	}
	var bad []string
	fs.Visit(func(f *pflag.Flag) {
		if r, ok := srunRefused[f.Name]; ok {
			bad = append(bad, fmt.Sprintf("--%s: %s", f.Name, r.why))
		}
	})
	if len(bad) > 0 {
		return o, nil, errors.New(strings.Join(bad, "; "))
	}
	if *nodes != "" {
		lo, _, _ := strings.Cut(*nodes, "-") // MIN[-MAX]: the minimum
		n, err := strconv.Atoi(lo)
		if err != nil || n < 1 {
			return o, nil, fmt.Errorf("--nodes=%s: want a number of machines, 1 or more", *nodes)
		}
		o.nodes = n
	}
	if o.ntasks < 0 || o.perNode < 0 {
		return o, nil, fmt.Errorf("--ntasks and --ntasks-per-node: want 1 or more")
	}
	if fs.NArg() == 0 {
		return o, nil, errors.New("no command to run")
	}
	return o, fs.Args(), nil
}

// TasksVar is Slurm's variable of the tasks a machine the job's
// allocation holds ("2(x3)": 2 on each of 3 machines), which a step
// starts unless its options say otherwise. gpuportal sbatch sets it
// where the script asks for more tasks a machine than the job runs it
// (a process per GPU runs it once per task, and needs none).
const TasksVar = "SLURM_TASKS_PER_NODE"

// allocatedPerNode reads TasksVar's first count; 0 when unset or
// unreadable.
func allocatedPerNode(v string) int {
	end := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(v)
	}
	n, err := strconv.Atoi(v[:end])
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// slurmTaskOf reads the task a process is from its environment.
func slurmTaskOf(getenv func(string) string) (slurmTask, error) {
	if getenv("SLURM_JOB_ID") == "" || getenv("GPUPORTAL_JOB_ID") == "" {
		return slurmTask{}, errors.New("not inside a gpuportal job (no SLURM_JOB_ID, GPUPORTAL_JOB_ID): srun runs the steps of a batch script that gpuportal sbatch submitted")
	}
	var t slurmTask
	for _, v := range []struct {
		name string
		to   *int
		min  int
	}{
		{"SLURM_PROCID", &t.procID, 0}, {"SLURM_LOCALID", &t.localID, 0}, {"SLURM_NODEID", &t.nodeID, 0},
		{"SLURM_NTASKS", &t.ntasks, 1}, {"SLURM_NNODES", &t.nnodes, 1}, {"SLURM_NTASKS_PER_NODE", &t.perNode, 1},
	} {
		n, err := strconv.Atoi(getenv(v.name))
		if err != nil || n < v.min {
			return t, fmt.Errorf("%s=%q: want a number, %d or more", v.name, getenv(v.name), v.min)
		}
		*v.to = n
	}
	return t, nil
}

// planSrun is what srun with options o does in task t. The job's tasks
// are t.perNode on each of its t.nnodes machines; the step's are those
// the options ask for: the same (the command runs in this task's place),
// fewer (it runs in the first tasks only: the others go on at once, for
// nothing waits for a step here), or a multiple (each task starts that
// many).
func planSrun(o srunOptions, t slurmTask) (srunPlan, error) {
	if o.nodes > t.nnodes {
		return srunPlan{}, fmt.Errorf("--nodes=%d: the job has %d machine(s)", o.nodes, t.nnodes)
	}
	nodes := t.nnodes
	if o.nodes > 0 {
		nodes = o.nodes
	}
	if t.nodeID >= nodes {
		return srunPlan{skip: fmt.Sprintf("--nodes=%d: the step runs on the job's first %d machine(s); machine %d skips it (nothing waits for it there)", nodes, nodes, t.nodeID)}, nil
	}
	switch {
	case o.perNode > 0:
		return srunPerNode(o.perNode, nodes, t)
	case o.ntasks > 0:
		have := t.perNode * nodes
		switch {
		case o.ntasks < have:
			if t.procID >= o.ntasks {
				return srunPlan{skip: fmt.Sprintf("--ntasks=%d: the step runs as tasks 0 to %d of the job's %d; task %d skips it (nothing waits for it there)", o.ntasks, o.ntasks-1, have, t.procID)}, nil
			}
			return srunPlan{env: stepEnv(o.ntasks, nodes, t.perNode)}, nil
		case o.ntasks%have != 0:
			return srunPlan{}, fmt.Errorf("--ntasks=%d: inside a job of %d task(s) a step has at most %d or a multiple of %d", o.ntasks, have, have, have)
		}
		k := o.ntasks / have
		return srunPlan{tasks: agent.Tasks{N: k, FirstRank: t.procID * k, FirstLocal: t.localID * k,
			Env: stepEnv(o.ntasks, nodes, t.perNode*k)}}, nil
	}
	if nodes < t.nnodes {
		return srunPlan{env: stepEnv(t.perNode*nodes, nodes, t.perNode)}, nil
	}
	return srunPlan{}, nil
}

// srunPerNode plans a step of m tasks a machine on the first nodes.
func srunPerNode(m, nodes int, t slurmTask) (srunPlan, error) {
	switch {
	case m == t.perNode:
		return srunPlan{env: stepEnv(m*nodes, nodes, m)}, nil
	case m < t.perNode:
		if t.localID >= m {
			return srunPlan{skip: fmt.Sprintf("--ntasks-per-node=%d: the step runs as the first %d task(s) of each machine; local task %d skips it (nothing waits for it there)", m, m, t.localID)}, nil
		}
		r, l := strconv.Itoa(t.nodeID*m+t.localID), strconv.Itoa(t.localID)
		return srunPlan{env: append(stepEnv(m*nodes, nodes, m), "SLURM_PROCID="+r, "RANK="+r, "SLURM_LOCALID="+l, "LOCAL_RANK="+l)}, nil
	case m%t.perNode != 0:
		return srunPlan{}, fmt.Errorf("--ntasks-per-node=%d: inside a job of %d task(s) a machine a step has at most %d or a multiple of %d", m, t.perNode, t.perNode, t.perNode)
	}
	k := m / t.perNode
	return srunPlan{tasks: agent.Tasks{N: k, FirstRank: t.nodeID*m + t.localID*k, FirstLocal: t.localID * k,
		Env: stepEnv(m*nodes, nodes, m)}}, nil
}

// stepEnv is Slurm's variables of a step of n tasks on nodes machines,
// perNode a machine, and the world that torch.distributed reads beside
// each task's RANK and LOCAL_RANK (docs/multinode.md).
func stepEnv(n, nodes, perNode int) []string {
	ns, nn, pn := strconv.Itoa(n), strconv.Itoa(nodes), strconv.Itoa(perNode)
	return []string{"SLURM_NTASKS=" + ns, "SLURM_NPROCS=" + ns, "SLURM_STEP_NUM_TASKS=" + ns,
		"SLURM_STEP_NUM_NODES=" + nn, "SLURM_NTASKS_PER_NODE=" + pn, "WORLD_SIZE=" + ns, "LOCAL_WORLD_SIZE=" + pn}
}
