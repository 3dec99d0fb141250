package sched

import (
	"bufio"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// traceJob is one job of a replayed trace.
type traceJob struct {
	id       int64
	gpus     int
	submit   float64
	duration float64
	model    string
}

// replay runs a trace through sc on a virtual clock, the way the trace
// simulator drives the core: a pass at every arrival, completion and
// Recheck. It returns the mean job completion time and the passes run.
func replay(tb testing.TB, sc *Scheduler, nodes []Node, trace []traceJob) (meanJCT float64, passes int) {
	tb.Helper()
	trace = slices.Clone(trace)
	slices.SortStableFunc(trace, func(a, b traceJob) int { return cmpFloat(a.submit, b.submit) })
	var (
		active   []Job
		left     []float64 // per active job: run time left
		where    = map[int64]int{}
		now      float64
		next     int
		sumJCT   float64
		finished int
	)
	for finished < len(trace) {
		for next < len(trace) && trace[next].submit <= now {
			tj := trace[next]
			where[tj.id] = len(active)
			active = append(active, Job{ID: tj.id, GPUs: tj.gpus, SubmitTime: tj.submit, DurationS: tj.duration, Model: tj.model})
			left = append(left, tj.duration)
			next++
		}
		d := sc.Schedule(Snapshot{Now: now, Nodes: nodes, Jobs: active})
		passes++
		for _, p := range d.Preempts {
			j := &active[where[p.JobID]]
			j.State, j.Placement = Pending, nil
		}
		for _, s := range d.Starts {
			j := &active[where[s.JobID]]
			j.State, j.Placement, j.LastStartTime = Running, s.GPUs, now
		}
		for _, c := range d.QueueChanges {
			active[where[c.JobID]].Queue = c.State
		}
		// Next event.
		t := math.Inf(1)
		if next < len(trace) {
			t = trace[next].submit
		}
		running := 0
		for i := range active {
			if j := &active[i]; j.State == Running {
				running++
				t = min(t, now+left[i])
			}
		}
		if d.Recheck > 0 && os.Getenv("NORECHECK") == "" {
			t = min(t, d.Recheck)
		}
		if math.IsInf(t, 1) {
			tb.Fatalf("stuck at %v with %d jobs left, %d running", now, len(active), running)
		}
		dt := t - now
		now = t
		for i := 0; i < len(active); i++ {
			j := &active[i]
			if j.State != Running {
				continue
			}
			j.ExecutedS += dt
			j.AttainedService += dt * float64(j.GPUs)
			left[i] -= dt
			if left[i] <= 1e-6 {
				sumJCT += now - j.SubmitTime
				finished++
				delete(where, j.ID)
				last := len(active) - 1
				if i != last {
					active[i], left[i] = active[last], left[last]
					where[active[i].ID] = i
				}
				active, left = active[:last], left[:last]
				i--
			}
		}
	}
	return sumJCT / float64(len(trace)), passes
}

// cmpFloat orders floats, NaN first.
func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	case a == b:
		return 0
	case a != a && b == b:
		return -1
	case a == a && b != b:
		return 1
	}
	return 0
}

// readTiresiasTrace reads a trace in the Tiresias simulator's CSV format.
func readTiresiasTrace(tb testing.TB, path string) []traceJob {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []traceJob
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		c := strings.Split(strings.TrimSpace(sc.Text()), ",")
		if len(c) < 6 {
			continue
		}
		id, _ := strconv.ParseInt(c[0], 10, 64)
		g, _ := strconv.Atoi(c[1])
		sub, _ := strconv.ParseFloat(c[2], 64)
		dur, _ := strconv.ParseFloat(c[5], 64)
		out = append(out, traceJob{id: id, gpus: g, submit: sub, duration: dur, model: c[4]})
	}
	return out
}

// uniformNodes returns n nodes of g GPUs each.
func uniformNodes(n, g int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i].Name = "node-" + strconv.Itoa(i)
		nodes[i].GPUs = make([]GPU, g)
		for k := range nodes[i].GPUs {
			nodes[i].GPUs[k].Index = k
		}
	}
	return nodes
}
