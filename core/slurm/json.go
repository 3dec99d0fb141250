package slurm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Job is a Slurm job as squeue --json reports it.
type Job struct {
	ID        int64
	Name      string
	Comment   string
	User      string
	Partition string
	// State is the job's state in capitals: PENDING, RUNNING, COMPLETED,
	// FAILED, CANCELLED, NODE_FAIL, TIMEOUT, ...
	State string
	// Reason is why it waits or how it ended: JobHeldUser, Resources,
	// NonZeroExitCode, NodeDown, ...
	Reason string
	// WaitStatus is the raw wait status of the batch script: the exit
	// code in the high byte, the signal that ended it in the low bits
	// (768 is exit code 3). See ExitCode.
	WaitStatus int
	Nodes      string // the nodes it runs or ran on, in Slurm's host list syntax
	// RequiredNodes are the nodes it was pinned to (--nodelist).
	RequiredNodes string
	CPUs          int
	MemMiB        int64 // per node
	SubmitTime    time.Time
	StartTime     time.Time // zero before it starts
	EndTime       time.Time // zero before it ends
	// GPUs are the indices of the GPUs Slurm allocated it, while it runs
	// (from gres_detail, such as "gpu:2(IDX:0-1)").
	GPUs []int
}

// Finished tells whether the job has ended, for good: it will not run
// again.
func (j Job) Finished() bool {
	switch j.State {
	case "PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED",
		"REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SIGNALING",
		"STAGE_OUT", "STOPPED", "RESV_DEL_HOLD", "":
		return false
	}
	return true
}

// Started tells whether the job has left the queue for a node.
func (j Job) Started() bool {
	return j.State != "PENDING" && j.State != "" && !strings.HasPrefix(j.State, "REQUEUE")
}

// Held tells whether the job waits to be released.
func (j Job) Held() bool {
	return j.State == "PENDING" && (j.Reason == "JobHeldUser" || j.Reason == "JobHeldAdmin")
}

// ExitCode decodes the wait status: the script's exit code, or -1 and
// the signal that ended it.
func (j Job) ExitCode() (code int, signal syscall.Signal) {
	ws := syscall.WaitStatus(j.WaitStatus)
	if ws.Signaled() {
		return -1, ws.Signal()
	}
	return ws.ExitStatus(), 0
}

// Node is a Slurm node as sinfo --json reports it.
type Node struct {
	Name string
	// State is the base state in capitals: IDLE, MIXED, ALLOCATED, DOWN,
	// UNKNOWN, FUTURE, ...
	State string
	// Flags qualify it: DRAIN, NOT_RESPONDING, MAINTENANCE, ...
	Flags      []string
	Reason     string
	CPUs       int
	MemMiB     int64 // RealMemory
	GPUs       []GPU
	Partitions []string
}

// GPU is one GPU of a node as its gres says: gpu:a100:2 is two GPUs of
// type a100, indices 0 and 1.
type GPU struct {
	Index int
	Type  string // empty when the gres names none
}

// HasFlag tells whether the node carries a state flag (DRAIN, ...).
func (n Node) HasFlag(flag string) bool {
	for _, f := range n.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// Lost tells whether the node cannot run jobs: down, powered off, or
// not yet registered. A node that merely stopped responding is not lost:
// Slurm marks it down once SlurmdTimeout passes (and it briefly flags a
// node it resumes as not responding).
func (n Node) Lost() bool {
	switch n.State {
	case "DOWN", "UNKNOWN", "FUTURE", "ERROR":
		return true
	}
	return n.HasFlag("POWERED_DOWN") || n.HasFlag("POWERING_DOWN") || n.HasFlag("POWER_DOWN") || n.HasFlag("REBOOT_ISSUED")
}

// Draining tells whether Slurm takes no new jobs on the node (drain,
// maintenance, reboot or failure pending) while it still runs the ones it
// has.
func (n Node) Draining() bool {
	return n.HasFlag("DRAIN") || n.HasFlag("FAIL") || n.HasFlag("MAINTENANCE") || n.HasFlag("REBOOT_REQUESTED")
}

// InPartition tells whether the node belongs to partition p; every node
// belongs to the empty partition.
func (n Node) InPartition(p string) bool {
	if p == "" {
		return true
	}
	for _, q := range n.Partitions {
		if q == p {
			return true
		}
	}
	return false
}

// squeueJSON is the part of squeue --json that gpuportal reads.
type squeueJSON struct {
	Errors []slurmError `json:"errors"`
	Jobs   []struct {
		JobID      number     `json:"job_id"`
		Name       string     `json:"name"`
		Comment    string     `json:"comment"`
		UserName   string     `json:"user_name"`
		Partition  string     `json:"partition"`
		JobState   stateField `json:"job_state"`
		Reason     string     `json:"state_reason"`
		ExitCode   exitField  `json:"exit_code"`
		Nodes      string     `json:"nodes"`
		Required   string     `json:"required_nodes"`
		CPUs       number     `json:"cpus"`
		MemPerNode number     `json:"memory_per_node"`
		SubmitTime number     `json:"submit_time"`
		StartTime  number     `json:"start_time"`
		EndTime    number     `json:"end_time"`
		GresDetail []string   `json:"gres_detail"`
	} `json:"jobs"`
}

// sinfoJSON is the part of sinfo --json that gpuportal reads.
type sinfoJSON struct {
	Errors []slurmError `json:"errors"`
	Nodes  []struct {
		Name       string     `json:"name"`
		State      stateField `json:"state"`
		StateFlags []string   `json:"state_flags"`
		Reason     string     `json:"reason"`
		CPUs       number     `json:"cpus"`
		RealMemory number     `json:"real_memory"`
		Gres       string     `json:"gres"`
		Partitions []string   `json:"partitions"`
	} `json:"nodes"`
}

type slurmError struct {
	Error       string `json:"error"`
	Description string `json:"description"`
	ErrorNumber int    `json:"error_number"`
	Source      string `json:"source"`
}

func checkErrors(errs []slurmError) error {
	if len(errs) == 0 {
		return nil
	}
	e := errs[0]
	msg := e.Error
	if msg == "" {
		msg = e.Description
	}
	return fmt.Errorf("slurm error %d: %s", e.ErrorNumber, msg)
}

// ParseJobs reads the output of squeue --json.
func ParseJobs(data []byte) ([]Job, error) {
	var raw squeueJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parse squeue JSON: %w", err)
	}
	if err := checkErrors(raw.Errors); err != nil {
		return nil, err
	}
	jobs := make([]Job, 0, len(raw.Jobs))
	for _, r := range raw.Jobs {
		if r.JobID <= 0 {
			return nil, fmt.Errorf("parse squeue JSON: job ID %d", r.JobID)
		}
		j := Job{
			ID: int64(r.JobID), Name: r.Name, Comment: r.Comment, User: r.UserName,
			Partition: r.Partition, State: strings.ToUpper(string(r.JobState)), Reason: r.Reason,
			WaitStatus: int(r.ExitCode), Nodes: r.Nodes, RequiredNodes: r.Required,
			CPUs: int(max(min(r.CPUs, math.MaxInt32), 0)), MemMiB: int64(max(r.MemPerNode, 0)),
			SubmitTime: unixTime(r.SubmitTime),
		}
		if j.Started() {
			j.StartTime = unixTime(r.StartTime)
		}
		if j.Finished() {
			j.EndTime = unixTime(r.EndTime)
		}
		for _, g := range r.GresDetail {
			j.GPUs = append(j.GPUs, parseGresIndices(g)...)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// ParseNodes reads the output of sinfo --json.
func ParseNodes(data []byte) ([]Node, error) {
	var raw sinfoJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("parse sinfo JSON: %w", err)
	}
	if err := checkErrors(raw.Errors); err != nil {
		return nil, err
	}
	nodes := make([]Node, 0, len(raw.Nodes))
	for _, r := range raw.Nodes {
		if r.Name == "" {
			return nil, errors.New("parse sinfo JSON: a node without a name")
		}
		if r.CPUs < 0 || r.RealMemory < 0 {
			return nil, fmt.Errorf("parse sinfo JSON: node %s: %d CPUs, %d MiB", r.Name, r.CPUs, r.RealMemory)
		}
		n := Node{
			Name: r.Name, State: strings.ToUpper(string(r.State)), Reason: r.Reason,
			CPUs: int(min(r.CPUs, math.MaxInt32)), MemMiB: int64(r.RealMemory),
			Partitions: r.Partitions,
		}
		for _, f := range r.StateFlags {
			n.Flags = append(n.Flags, strings.ToUpper(f))
		}
		// Slurm 23.02 and later put the flags in the state list.
		if i := strings.IndexByte(n.State, '+'); i >= 0 {
			n.Flags = append(n.Flags, strings.Split(n.State[i+1:], "+")...)
			n.State = n.State[:i]
		}
		gpus, err := ParseGres(r.Gres)
		if err != nil {
			return nil, fmt.Errorf("parse sinfo JSON: node %s: %w", r.Name, err)
		}
		n.GPUs = gpus
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// maxGPUsPerNode bounds a node's GPUs, against nonsense in a gres string.
const maxGPUsPerNode = 1024

// ParseGres reads the GPUs of a node's gres: "gpu:4", "gpu:a100:4",
// "gpu:a100:2(S:0-1),gpu:v100:2", "gpu:4,shard:8". Other kinds of gres are
// skipped; "" and "(null)" mean none. The GPUs are numbered in the order
// the gres names them, which is the order of gres.conf.
func ParseGres(s string) ([]GPU, error) {
	var gpus []GPU
	for _, part := range splitOutsideParens(s) {
		// Drop a socket list such as "(S:0-1)".
		if i := strings.IndexByte(part, '('); i >= 0 {
			part = part[:i]
		}
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		fields := strings.Split(part, ":")
		if fields[0] != "gpu" {
			continue
		}
		var typ, count string
		switch len(fields) {
		case 1:
			count = "1"
		case 2:
			count = fields[1]
		case 3:
			typ, count = fields[1], fields[2]
		default:
			return nil, fmt.Errorf("gres %q: cannot read %q", s, part)
		}
		if !validGresType(typ) {
			return nil, fmt.Errorf("gres %q: GPU type %q", s, typ)
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("gres %q: GPU count %q", s, count)
		}
		if n > maxGPUsPerNode || len(gpus)+n > maxGPUsPerNode {
			return nil, fmt.Errorf("gres %q: more than %d GPUs", s, maxGPUsPerNode)
		}
		for range n {
			gpus = append(gpus, GPU{Index: len(gpus), Type: typ})
		}
	}
	return gpus, nil
}

// validGresType tells whether typ can be a gres type: letters, digits,
// '_', '-' and '.'.
func validGresType(typ string) bool {
	for _, c := range typ {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func splitOutsideParens(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// parseGresIndices reads the GPU indices of a gres_detail entry,
// "gpu:2(IDX:0-1)" or "gpu:a100:1(IDX:0),gpu:v100:1(IDX:2)"; other gres
// and entries without indices give none.
func parseGresIndices(s string) []int {
	var out []int
	for _, part := range splitOutsideParens(s) {
		if part != "gpu" && !strings.HasPrefix(part, "gpu:") && !strings.HasPrefix(part, "gpu(") {
			continue
		}
		_, rest, ok := strings.Cut(part, "IDX:")
		if !ok {
			continue
		}
		rest, _, _ = strings.Cut(rest, ")")
		if idx, err := parseIndexList(rest); err == nil {
			out = append(out, idx...)
		}
	}
	if len(out) > maxGPUsPerNode {
		return nil
	}
	slices.Sort(out)
	return out
}

// parseIndexList reads "0,2-3" as [0 2 3].
func parseIndexList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a >= maxGPUsPerNode {
			return nil, fmt.Errorf("index list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b >= maxGPUsPerNode {
				return nil, fmt.Errorf("index list %q", s)
			}
		}
		if len(out)+b-a >= maxGPUsPerNode {
			return nil, fmt.Errorf("index list %q: too long", s)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out, nil
}

func unixTime(n number) time.Time {
	if n <= 0 || n > 1<<40 {
		return time.Time{}
	}
	return time.Unix(int64(n), 0)
}

// number is a JSON integer: a number, null (0), or the object
// {"set":true,"number":N} of Slurm 23.02 and later.
type number int64

func (n *number) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*n = 0
		return nil
	}
	if len(b) > 0 && b[0] == '{' {
		var o struct {
			Set      bool    `json:"set"`
			Infinite bool    `json:"infinite"`
			Number   float64 `json:"number"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		if !o.Set || o.Infinite {
			*n = 0
			return nil
		}
		return n.set(o.Number)
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	return n.set(f)
}

func (n *number) set(f float64) error {
	if math.IsNaN(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return fmt.Errorf("number %v out of range", f)
	}
	*n = number(f)
	return nil
}

// stateField is a state: a string, or the list of Slurm 23.02 and later
// (["RUNNING"], ["IDLE","DRAIN"]), joined with "+".
type stateField string

func (s *stateField) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var list []string
		if err := json.Unmarshal(b, &list); err != nil {
			return err
		}
		*s = stateField(strings.Join(list, "+"))
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return err
	}
	*s = stateField(str)
	return nil
}

// exitField is a job's exit: the raw wait status of Slurm 22.05, or the
// object of 23.02 and later ({"return_code":N,"signal":{"signal_id":S}}),
// turned back into a wait status.
type exitField int

func (e *exitField) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var o struct {
			ReturnCode number `json:"return_code"`
			Signal     struct {
				ID number `json:"signal_id"`
			} `json:"signal"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		if o.Signal.ID > 0 && o.Signal.ID < 128 {
			*e = exitField(o.Signal.ID)
			return nil
		}
		*e = exitField((o.ReturnCode & 0xff) << 8)
		return nil
	}
	var n number
	if err := n.UnmarshalJSON(b); err != nil {
		return err
	}
	if n < 0 || n > math.MaxInt32 {
		return fmt.Errorf("exit code %d out of range", n)
	}
	*e = exitField(n)
	return nil
}
