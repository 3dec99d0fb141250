// Package wire is the protocol between a remote node agent and the server:
// JSON messages over one websocket that the agent opens to the server.
//
// The agent connects to Path with its token as a bearer token and sends
// Hello, naming the machines it runs and the jobs still running on them;
// the server answers Welcome (or closes the connection with a reason).
// From then on the agent sends a Heartbeat with every GPU's sample every
// second, Log chunks of its jobs' output, and an Exit when a job's run
// ends; the server sends Start and Stop. Start, Stop and Exit carry an ID
// that the other side answers with an Ack naming it.
//
// Every message is one JSON object whose "type" says which one of the
// other fields is set. Version changes when a change would break a peer of
// the previous version; adding optional fields does not change it.
package wire

import (
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// Version is the protocol's version. The server refuses a Hello of any
// other.
const Version = 3

// Path is where the server accepts agent connections.
const Path = "/api/v1/agents/connect"

// MaxMessageBytes bounds one message: a peer closes the connection on a
// larger one.
const MaxMessageBytes = 1 << 20

// MaxLogChunk is the most output one Log message carries.
const MaxLogChunk = 256 << 10

// Type names a message.
type Type string

// The message types.
const (
	TypeHello     Type = "hello"     // agent -> server, first
	TypeWelcome   Type = "welcome"   // server -> agent, answers Hello
	TypeHeartbeat Type = "heartbeat" // agent -> server, every second
	TypeStart     Type = "start"     // server -> agent, answered by Ack
	TypeStop      Type = "stop"      // server -> agent, answered by Ack
	TypeExit      Type = "exit"      // agent -> server, answered by Ack
	TypeLog       Type = "log"       // agent -> server
	TypeAck       Type = "ack"       // answers Start, Stop, Resize, Dial and Exit
	TypeResize    Type = "resize"    // server -> agent, answered by Ack (resources.go)
)

// Message is one frame. Type says which other field is set.
type Message struct {
	Type Type `json:"type"`
	// ID numbers a request (Start, Stop, Exit); its Ack repeats it.
	ID uint64 `json:"id,omitempty"`

	Hello     *Hello     `json:"hello,omitempty"`
	Welcome   *Welcome   `json:"welcome,omitempty"`
	Heartbeat *Heartbeat `json:"heartbeat,omitempty"`
	Start     *Start     `json:"start,omitempty"`
	Stop      *Stop      `json:"stop,omitempty"`
	Exit      *Exit      `json:"exit,omitempty"`
	Log       *Log       `json:"log,omitempty"`
	Ack       *Ack       `json:"ack,omitempty"`
	Resize    *Resize    `json:"resize,omitempty"`
	Dial      *Dial      `json:"dial,omitempty"`
}

// Check reports whether the field that Type names is set.
func (m *Message) Check() error {
	var ok bool
	switch m.Type {
	case TypeHello:
		ok = m.Hello != nil
	case TypeWelcome:
		ok = m.Welcome != nil
	case TypeHeartbeat:
		ok = m.Heartbeat != nil
	case TypeStart:
		ok = m.Start != nil
	case TypeStop:
		ok = m.Stop != nil
	case TypeExit:
		ok = m.Exit != nil
	case TypeLog:
		ok = m.Log != nil
	case TypeAck:
		ok = m.Ack != nil
	case TypeResize:
		ok = m.Resize != nil
	case TypeDial:
		ok = m.Dial != nil
	default:
		return fmt.Errorf("unknown message type %q", m.Type)
	}
	if !ok {
		return fmt.Errorf("%s message without its %s field", m.Type, m.Type)
	}
	return nil
}

// Hello opens a connection: the agent and the machines it runs.
type Hello struct {
	Version int `json:"version"`
	// Agent names the agent process, for logs: its host name.
	Agent string `json:"agent"`
	Nodes []Node `json:"nodes"`
}

// Node is one machine as the agent registers it.
type Node struct {
	Name   string `json:"name"`
	CPUs   int    `json:"cpus"`
	MemMiB int64  `json:"mem_mib"`
	GPUs   []GPU  `json:"gpus"`
	// Running lists the runs the server has not yet seen end: those
	// still running and those whose Exit is not yet acknowledged.
	Running []job.RunRef `json:"running"`
	// RunningGPUs are the GPUs each job of Running holds on this machine
	// (rungpus.go); agents before it leave it out.
	RunningGPUs []JobGPUs `json:"running_gpus,omitempty"`
	// Monitor says the agent only watches this machine's GPUs (gpuportal
	// agent --monitor-only): another system (Slurm) runs its jobs, and the
	// agent refuses starts.
	Monitor bool `json:"monitor,omitempty"`
	// Credential is the machine's own credential, which the server gave it
	// when it first joined (Welcome.Credentials); empty before.
	Credential string `json:"credential,omitempty"`
	// Addr is the address other machines reach this one at, for the
	// rendezvous of jobs on several machines (job.Gang): agent
	// --advertise-addr, else the address of the agent's connection to
	// the server. Agents before it leave it out: the server then takes
	// the address the connection comes from.
	Addr string `json:"addr,omitempty"`
}

// GPU describes one GPU of a machine.
type GPU struct {
	Index  int    `json:"index"`
	UUID   string `json:"uuid"`
	Model  string `json:"model"`
	MemMiB int64  `json:"mem_mib"`
}

// Welcome accepts a Hello.
type Welcome struct {
	Version int `json:"version"`
	// HeartbeatTimeoutMS is how long the server waits for a message
	// before it takes the agent for lost; the agent does the same for the
	// server, which pings more often than that.
	HeartbeatTimeoutMS int64 `json:"heartbeat_timeout_ms"`
	// Logs says how much of each running job's output the server holds,
	// so the agent sends the rest.
	Logs []LogOffset `json:"logs,omitempty"`
	// Credentials are the credentials of the machines this hello
	// registered: the agent keeps each in the machine's work folder and
	// presents it from then on. They are shown once.
	Credentials []NodeCredential `json:"credentials,omitempty"`
}

// NodeCredential is a newly registered machine's credential.
type NodeCredential struct {
	Node       string `json:"node"`
	Credential string `json:"credential"`
}

// LogOffset is how many bytes of a job's output on a node the server has.
type LogOffset struct {
	Node   string `json:"node"`
	JobID  int64  `json:"job_id"`
	Offset int64  `json:"offset"`
}

// Heartbeat says the agent is alive and carries each machine's latest
// GPU samples.
type Heartbeat struct {
	Nodes []NodeSamples `json:"nodes"`
}

// NodeSamples is one reading of every GPU of a machine.
type NodeSamples struct {
	Node    string   `json:"node"`
	Samples []Sample `json:"samples"`
	// Lanes are the Salus lanes of the machine's GPUs, when its agent
	// serves a gate (see lanes.go).
	Lanes []GPULanes `json:"lanes,omitempty"`
	// Usage is each running job's CPU and memory use (resources.go).
	Usage []JobUsage `json:"usage,omitempty"`
}

// Sample is one reading of one GPU.
type Sample struct {
	At         time.Time `json:"at"`
	Index      int       `json:"index"`
	MemUsedMiB int64     `json:"mem_used_mib"`
	MemMiB     int64     `json:"mem_mib"`
	// MemReservedMiB: the driver's own memory (gpu.Sample); absent from
	// agents that do not read it.
	MemReservedMiB int64    `json:"mem_reserved_mib,omitempty"`
	UtilPct        float64  `json:"util_pct"`
	TempC          int      `json:"temp_c,omitempty"`
	PowerW         float64  `json:"power_w,omitempty"`
	ECCErrors      uint64   `json:"ecc_errors,omitempty"`
	XIDErrors      uint64   `json:"xid_errors,omitempty"`
	LastXID        int      `json:"last_xid,omitempty"`
	Jobs           []JobMem `json:"jobs,omitempty"`
}

// JobMem is one job's memory on a GPU.
type JobMem struct {
	JobID  int64 `json:"job_id"`
	MemMiB int64 `json:"mem_mib"`
}

// Start asks the agent to start a run of a job on one of its machines.
type Start struct {
	Node string  `json:"node"`
	Job  JobSpec `json:"job"`
	// LogOffset is how much of the job's output on this node the server
	// already holds (from earlier runs).
	LogOffset int64 `json:"log_offset"`
}

// JobSpec is what a machine needs to run its part of a job.
type JobSpec struct {
	JobID int64 `json:"job_id"`
	// Run numbers this start of the job; every later message about it
	// names it.
	Run     int64    `json:"run"`
	Command []string `json:"command,omitempty"` // argv; empty for a simulated job
	GPUs    []int    `json:"gpus"`
	// SimRemainingMS is how long a simulated job still has to run.
	SimRemainingMS int64      `json:"sim_remaining_ms,omitempty"`
	SimMemory      *SimMemory `json:"sim_memory,omitempty"`
	// Sharing opts the job in to Salus sharing through the agent's gate
	// (job.Sharing); absent: not shared.
	Sharing *Sharing `json:"sharing,omitempty"`
	// Resources are the part's CPUs and memory; absent: not limited.
	Resources *Resources `json:"resources,omitempty"`
	// Env are the job's own variables, "NAME=VALUE"; Dir the folder it
	// starts in ("": its job folder); Array the array task it is.
	Env   []string   `json:"env,omitempty"`
	Dir   string     `json:"dir,omitempty"`
	Array *ArrayTask `json:"array,omitempty"`
	// TimeLeftMS is what remains of the job's time limit (job.Spec.TimeLeft); 0: none.
	TimeLeftMS int64 `json:"time_left_ms,omitempty"`
	// Account is the Unix account of the job's owner (job.Spec.Account),
	// which an agent started with --run-as owner runs the job as. Servers
	// before it leave it out, and such an agent refuses their command
	// jobs; other agents ignore it. Optional both ways, so the protocol's
	// version stays.
	Account string `json:"account,omitempty"`
	// Image is the container image the command runs in (job.Spec.Image);
	// absent: on the machine. An agent that runs no containers refuses
	// the job rather than run it outside its image.
	Image string `json:"image,omitempty"`
	// Session makes the run an interactive session (session.go); absent:
	// a batch run. Agents before it run the command as a batch job.
	Session *Session `json:"session,omitempty"`
	// Name is the job's name (SLURM_JOB_NAME).
	Name string `json:"name,omitempty"`
	// Gang is the rendezvous of a run on several machines (job.Gang);
	// absent: one machine, one process. Agents before it run the part
	// without it.
	Gang *Gang `json:"gang,omitempty"`
	// Checkpoint is the server's copy of the part's checkpoint folder
	// (checkpoint.go); absent: none. Agents before it start from their
	// own folder.
	Checkpoint *CheckpointCopy `json:"checkpoint,omitempty"`
}

// Gang is the rendezvous of a run on several machines (job.Gang).
type Gang struct {
	Nodes       []GangNode `json:"nodes"`
	Rank        int        `json:"rank"`
	MasterPort  int        `json:"master_port"`
	TasksPerGPU bool       `json:"tasks_per_gpu,omitempty"`
}

// GangNode is one machine of a gang (job.GangNode).
type GangNode struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	GPUs int    `json:"gpus"`
}

// ArrayTask names a task of an array (job.ArrayTask).
type ArrayTask struct {
	ID    int64 `json:"id"`
	Index int   `json:"index"`
}

// Sharing is a job's opt-in to sharing its GPU, an iteration at a time.
type Sharing struct {
	// Memory is the job's estimate on each of its GPUs, unpadded.
	Memory     Estimate `json:"memory"`
	DurationS  float64  `json:"duration_s,omitempty"`
	Iterations int64    `json:"iterations,omitempty"`
}

// Estimate is a memory estimate (memest.Estimate): persistent memory P,
// ephemeral memory E, and where it came from.
type Estimate struct {
	PersistentMiB int64  `json:"persistent_mib"`
	EphemeralMiB  int64  `json:"ephemeral_mib"`
	Source        string `json:"source,omitempty"`
}

// SimMemory is a simulated job's memory model (see gpu.SimMemory).
type SimMemory struct {
	PersistentMiB int64 `json:"persistent_mib"`
	EphemeralMiB  int64 `json:"ephemeral_mib"`
	IterationMS   int64 `json:"iteration_ms"`
	// UtilPct is gpu.SimMemory.UtilPct: absent for a training job's.
	UtilPct *float64 `json:"util_pct,omitempty"`
}

// Stop asks the agent to stop a job's run: SIGTERM, then SIGKILL after
// its grace period. Its Exit follows.
type Stop struct {
	Node  string `json:"node"`
	JobID int64  `json:"job_id"`
	// Run is the run to stop: another run of the job is left alone.
	Run int64 `json:"run"`
}

// Exit reports that a job's run ended.
type Exit struct {
	Node     string    `json:"node"`
	JobID    int64     `json:"job_id"`
	Run      int64     `json:"run"`
	ExitCode int       `json:"exit_code"` // -1 when killed by a signal or never started
	Err      string    `json:"err,omitempty"`
	At       time.Time `json:"at"`
	// Requeue is set when the agent's gate stopped the job because it
	// outgrew its lane: the estimate to run it again with.
	Requeue *Estimate `json:"requeue,omitempty"`
	// Measured is a sharing job's estimate as the gate corrected it from
	// the peaks it measured (unpadded, source "measured"), set once it
	// measured enough of them: its next run starts from it.
	Measured *Estimate `json:"measured,omitempty"`
	// Infra marks an end that is not the job's fault: the agent stopped
	// the run because it heard no server (it fenced itself). The job waits
	// again without a failure counted.
	Infra bool `json:"infra,omitempty"`
	// EndedAs is "timed_out" when the agent stopped the run because its
	// time was up and no server had (job.Exit.EndedAs).
	EndedAs string `json:"ended_as,omitempty"`
	// Resume is what the run found in its checkpoint folder as it
	// started (job.Exit.Resume), as its usage said.
	Resume *Resume `json:"resume,omitempty"`
	// Checkpoint is what the run's checkpoint folder holds as it ended
	// (checkpoint.go); absent: not looked at.
	Checkpoint *CheckpointState `json:"checkpoint,omitempty"`
}

// Log is a chunk of a job's output: Data belongs at Offset of the job's
// output on the node. Chunks may repeat; writing each at its offset makes
// that harmless.
type Log struct {
	Node   string `json:"node"`
	JobID  int64  `json:"job_id"`
	Offset int64  `json:"offset"`
	Data   []byte `json:"data"`
}

// Ack answers the request whose ID it repeats. Error is empty on success.
type Ack struct {
	Error string `json:"error,omitempty"`
	// NoAccount says why a Start was refused when the job's Unix account
	// does not exist on the machine or may not run jobs there
	// (job.AccountError): the server waits the job for another machine.
	// Agents before it leave it out, and their refusal is a plain error.
	NoAccount *NoAccount `json:"no_account,omitempty"`
}

// NoAccount is a start refused for the job's Unix account.
type NoAccount struct {
	Account string `json:"account"`
	// Why is set when the account exists but may not run jobs (root, a
	// system account); empty: there is no such account.
	Why string `json:"why,omitempty"`
}

// nodeNameRe and addrRe are compiled on first use: their bounded
// repeats make programs of hundreds of kilobytes, which every command of
// the binary would otherwise build at start-up.
var nodeNameRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
})

// CheckNodeName reports whether name can name a machine: 1 to 63 letters,
// digits, dots, dashes and underscores, starting with a letter or digit.
// The server keeps files under the name, so nothing else is accepted.
func CheckNodeName(name string) error {
	if !nodeNameRe().MatchString(name) {
		return fmt.Errorf("node name %q: want 1 to 63 letters, digits, '.', '-' or '_', starting with a letter or digit", name)
	}
	return nil
}

var addrRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.:_%-]{0,252}$`)
})

// CheckAddr reports whether addr can be a machine's address for the
// rendezvous of a job (Node.Addr): a host name or an IP address, without
// a port, 1 to 253 characters.
func CheckAddr(addr string) error {
	if !addrRe().MatchString(addr) {
		return fmt.Errorf("address %q: want a host name or IP address (letters, digits, '.', ':', '-', '_', '%%'), without a port", addr)
	}
	return nil
}

// FromDevices describes GPUs for a Hello.
func FromDevices(ds []gpu.Device) []GPU {
	out := make([]GPU, len(ds))
	for i, d := range ds {
		out[i] = GPU{Index: d.Index, UUID: d.UUID, Model: d.Model, MemMiB: d.MemMiB}
	}
	return out
}

// Devices turns a Hello's GPUs back into devices.
func Devices(gs []GPU) []gpu.Device {
	out := make([]gpu.Device, len(gs))
	for i, g := range gs {
		out[i] = gpu.Device{Index: g.Index, UUID: g.UUID, Model: g.Model, MemMiB: g.MemMiB}
	}
	return out
}

// FromSamples encodes GPU samples. Processes stay behind: their PIDs mean
// nothing off the machine, and the agent has counted jobs' processes in
// Jobs.
func FromSamples(ss []gpu.Sample) []Sample {
	out := make([]Sample, len(ss))
	for i, s := range ss {
		w := Sample{
			At: s.At, Index: s.Index, MemUsedMiB: s.MemUsedMiB, MemMiB: s.MemMiB, MemReservedMiB: s.MemReservedMiB, UtilPct: s.UtilPct,
			TempC: s.TempC, PowerW: s.PowerW, ECCErrors: s.ECCErrors,
			XIDErrors: s.XIDErrors, LastXID: s.LastXID,
		}
		for _, j := range s.Jobs {
			w.Jobs = append(w.Jobs, JobMem{JobID: j.JobID, MemMiB: j.MemMiB})
		}
		out[i] = w
	}
	return out
}

// Samples decodes GPU samples.
func Samples(ws []Sample) []gpu.Sample {
	out := make([]gpu.Sample, len(ws))
	for i, w := range ws {
		s := gpu.Sample{
			At: w.At, Index: w.Index, MemUsedMiB: w.MemUsedMiB, MemMiB: w.MemMiB, MemReservedMiB: w.MemReservedMiB, UtilPct: w.UtilPct,
			TempC: w.TempC, PowerW: w.PowerW, ECCErrors: w.ECCErrors,
			XIDErrors: w.XIDErrors, LastXID: w.LastXID,
		}
		for _, j := range w.Jobs {
			s.Jobs = append(s.Jobs, gpu.JobMem{JobID: j.JobID, MemMiB: j.MemMiB})
		}
		out[i] = s
	}
	return out
}
