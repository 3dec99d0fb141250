package job

import (
	"fmt"
	"strconv"
	"strings"
)

// A job placed on several machines runs as a gang: one part per machine,
// each told where the others are, as Slurm's srun and torchrun expect
// (docs/multinode.md). The engine builds one Gang per run and gives each
// part its own copy with Rank set.

// Gang is the rendezvous of a run: the machines of every part, in rank
// order, the first of which is the master.
type Gang struct {
	// Nodes are the run's machines, rank 0 first.
	Nodes []GangNode `json:"nodes"`
	// Rank is this part's machine in Nodes (NODE_RANK).
	Rank int `json:"rank"`
	// MasterPort is the port reserved for the run on the first machine
	// (MASTER_PORT); MASTER_ADDR is that machine's Addr.
	MasterPort int `json:"master_port"`
	// TasksPerGPU starts one process per GPU of each part, each with its
	// RANK and LOCAL_RANK, instead of one per machine.
	TasksPerGPU bool `json:"tasks_per_gpu,omitempty"`
}

// GangNode is one machine of a gang.
type GangNode struct {
	Name string `json:"name"`
	// Addr is the address the other machines reach it at, as its agent
	// reported it (agent --advertise-addr, or the address it connects to
	// the server from).
	Addr string `json:"addr"`
	// GPUs are how many GPUs the run holds there.
	GPUs int `json:"gpus"`
}

// Slots are the processes a machine of the gang counts for in the
// world: its GPUs, or 1 for a machine without any.
func (n GangNode) Slots() int { return max(n.GPUs, 1) }

// Check tells whether g can be handed to a machine: nodes named and
// addressed, a rank among them, a port.
func (g *Gang) Check() error {
	if len(g.Nodes) == 0 {
		return fmt.Errorf("gang: no machines")
	}
	if g.Rank < 0 || g.Rank >= len(g.Nodes) {
		return fmt.Errorf("gang: rank %d of %d machines", g.Rank, len(g.Nodes))
	}
	if g.MasterPort < 1 || g.MasterPort > 65535 {
		return fmt.Errorf("gang: master port %d", g.MasterPort)
	}
	for i, n := range g.Nodes {
		if n.Name == "" || n.Addr == "" || strings.ContainsAny(n.Addr+n.Name, " \t\n,=") {
			return fmt.Errorf("gang: machine %d (%q at %q) has no usable name or address", i, n.Name, n.Addr)
		}
	}
	return nil
}

// WorldSize is the number of processes of the whole run, one per GPU
// (Slots) of every machine.
func (g *Gang) WorldSize() int {
	n := 0
	for _, m := range g.Nodes {
		n += m.Slots()
	}
	return n
}

// firstRank is the global rank of the first process of machine r.
func (g *Gang) firstRank(r int) int {
	n := 0
	for _, m := range g.Nodes[:r] {
		n += m.Slots()
	}
	return n
}

// FirstRank is the global rank (RANK) of the first process of this part.
func (g *Gang) FirstRank() int { return g.firstRank(g.Rank) }

// HostfileName is the hostfile's name in the job folder.
const HostfileName = "hostfile"

// Hostfile is the run's hostfile as MPI and DeepSpeed read it: one
// "ADDR slots=N" line per machine, in rank order.
func (g *Gang) Hostfile() string {
	var b strings.Builder
	for _, n := range g.Nodes {
		fmt.Fprintf(&b, "%s slots=%d\n", n.Addr, n.Slots())
	}
	return b.String()
}

// Env is the rendezvous every process of this part gets, hostfile the
// path of the hostfile on this machine: torchrun's and the PyTorch
// env:// variables (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, NODE_RANK,
// NNODES, LOCAL_WORLD_SIZE), GPUPORTAL_NODES and GPUPORTAL_HOSTFILE.
// With TasksPerGPU each task adds its RANK and LOCAL_RANK (agent
// run-tasks).
func (g *Gang) Env(hostfile string) []string {
	names := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		names[i] = n.Name
	}
	return []string{
		"MASTER_ADDR=" + g.Nodes[0].Addr,
		"MASTER_PORT=" + strconv.Itoa(g.MasterPort),
		"WORLD_SIZE=" + strconv.Itoa(g.WorldSize()),
		"NODE_RANK=" + strconv.Itoa(g.Rank),
		"GROUP_RANK=" + strconv.Itoa(g.Rank),
		"NNODES=" + strconv.Itoa(len(g.Nodes)),
		"LOCAL_WORLD_SIZE=" + strconv.Itoa(g.Nodes[g.Rank].Slots()),
		"GPUPORTAL_NODES=" + strings.Join(names, ","),
		"GPUPORTAL_HOSTFILE=" + hostfile,
	}
}

// Tasks is how many processes this part starts: one per GPU with
// TasksPerGPU, else one.
func (g *Gang) Tasks() int {
	if g == nil || !g.TasksPerGPU {
		return 1
	}
	return g.Nodes[g.Rank].Slots()
}

// SlurmEnv are the variables of Slurm's that a batch script of a run reads
// (docs/slurm.md, "Scripts"), for run run of job id named name on gpus
// GPUs of this machine; g is the run's gang, nil for a run on one
// machine as one process; a the task of an array it is, or nil.
func SlurmEnv(id int64, name string, gpus int, g *Gang, a *ArrayTask, node string) []string {
	jid := strconv.FormatInt(id, 10)
	nodes, nodeID, ntasks, perNode := node, 0, 1, 1
	if g != nil {
		names := make([]string, len(g.Nodes))
		for i, n := range g.Nodes {
			names[i] = n.Name
		}
		nodes, nodeID = strings.Join(names, ","), g.Rank
		if g.TasksPerGPU {
			ntasks, perNode = g.WorldSize(), g.Nodes[g.Rank].Slots()
		} else {
			ntasks = len(g.Nodes)
		}
	}
	if a != nil {
		// A task is named NAME[INDEX]; Slurm gives every task the array's name.
		name = strings.TrimSuffix(name, "["+strconv.Itoa(a.Index)+"]")
	}
	nnodes := strings.Count(nodes, ",") + 1
	env := []string{
		"SLURM_JOB_ID=" + jid, "SLURM_JOBID=" + jid,
		"SLURM_JOB_NAME=" + name,
		"SLURM_JOB_NODELIST=" + nodes, "SLURM_NODELIST=" + nodes,
		"SLURM_JOB_NUM_NODES=" + strconv.Itoa(nnodes), "SLURM_NNODES=" + strconv.Itoa(nnodes),
		"SLURM_NODEID=" + strconv.Itoa(nodeID),
		"SLURMD_NODENAME=" + node,
		"SLURM_NTASKS=" + strconv.Itoa(ntasks), "SLURM_NPROCS=" + strconv.Itoa(ntasks),
		"SLURM_NTASKS_PER_NODE=" + strconv.Itoa(perNode),
		"SLURM_GPUS_ON_NODE=" + strconv.Itoa(gpus),
	}
	if g == nil || !g.TasksPerGPU {
		env = append(env, "SLURM_PROCID="+strconv.Itoa(nodeID), "SLURM_LOCALID=0")
	}
	if a != nil {
		env = append(env,
			"SLURM_ARRAY_JOB_ID="+strconv.FormatInt(a.ID, 10),
			"SLURM_ARRAY_TASK_ID="+strconv.Itoa(a.Index),
		)
	}
	return env
}
