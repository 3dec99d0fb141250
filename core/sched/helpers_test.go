package sched

import (
	"slices"
	"strconv"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// node returns a node of n GPUs, indexed from 0.
func node(name string, n int) Node {
	nd := Node{Name: name, GPUs: make([]GPU, n)}
	for i := range nd.GPUs {
		nd.GPUs[i] = GPU{Index: i, MemMiB: 81920}
	}
	return nd
}

// nodes returns nodes node-0, node-1, ... with the given GPU counts.
func nodes(sizes ...int) []Node {
	out := make([]Node, len(sizes))
	for i, n := range sizes {
		out[i] = node("node-"+strconv.Itoa(i), n)
	}
	return out
}

// on names GPUs of one node.
func on(nodeName string, idx ...int) []gpu.Ref {
	out := make([]gpu.Ref, len(idx))
	for i, k := range idx {
		out[i] = gpu.Ref{Node: nodeName, Index: k}
	}
	return out
}

// span returns the GPU indices from..to-1.
func span(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// pend is a pending job.
func pend(id int64, gpus int, submit float64, opts ...func(*Job)) Job {
	j := Job{ID: id, GPUs: gpus, SubmitTime: submit, Model: "resnet50"}
	for _, o := range opts {
		o(&j)
	}
	return j
}

// run is a running job holding placement.
func run(id int64, submit float64, placement []gpu.Ref, opts ...func(*Job)) Job {
	j := pend(id, len(placement), submit, opts...)
	j.State, j.Placement = Running, placement
	return j
}

// served sets a job's run time and attained service (GPUs x run time).
func served(seconds float64) func(*Job) {
	return func(j *Job) {
		j.ExecutedS = seconds
		j.AttainedService = seconds * float64(j.GPUs)
		j.LastStartTime = j.SubmitTime
	}
}

// lasting sets a job's known duration.
func lasting(d float64) func(*Job) { return func(j *Job) { j.DurationS = d } }

// model sets a job's model.
func model(m string) func(*Job) { return func(j *Job) { j.Model = m } }

// inQueue sets a job's stored queue state.
func inQueue(q int, since float64) func(*Job) {
	return func(j *Job) { j.Queue.Index, j.Queue.Since = q, since }
}

func mustNew(t testing.TB, cfg Config) *Scheduler {
	t.Helper()
	sc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// checked schedules s under cfg with a new scheduler and fails the test
// where the decisions break an invariant (checkDecisions).
func checked(t testing.TB, cfg Config, s Snapshot) Decisions {
	t.Helper()
	d := mustNew(t, cfg).Schedule(s)
	if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
		t.Fatalf("%s: %v", cfg.Policy, p)
	}
	return d
}

func startIDs(d Decisions) []int64 {
	var out []int64
	for _, s := range d.Starts {
		out = append(out, s.JobID)
	}
	return out
}

func preemptIDs(d Decisions) []int64 {
	var out []int64
	for _, p := range d.Preempts {
		out = append(out, p.JobID)
	}
	return out
}

func startOf(d Decisions, id int64) (Start, bool) {
	for _, s := range d.Starts {
		if s.JobID == id {
			return s, true
		}
	}
	return Start{}, false
}

func waitOf(d Decisions, id int64) (Wait, bool) {
	for _, w := range d.Waits {
		if w.JobID == id {
			return w, true
		}
	}
	return Wait{}, false
}

// sameIDs compares ID lists as sets.
func sameIDs(a, b []int64) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
