package sched

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// propertyConfigs are the configurations the property tests sweep.
func propertyConfigs() []Config {
	var out []Config
	for _, pol := range Policies() {
		out = append(out,
			Config{Policy: pol, LocalityWaitS: -1},
			Config{Policy: pol, Placement: PlaceCount},
			Config{Policy: pol, PromoteKnob: 1, OmitWaits: true},
			Config{Policy: pol, NoPreemption: true, LocalityWaitS: 1000},
		)
		for _, rule := range PolicyRules(pol)[min(1, len(PolicyRules(pol))):] {
			out = append(out,
				Config{Policy: pol, Rule: rule, LocalityWaitS: -1},
				Config{Policy: pol, Rule: rule, Placement: PlaceCount, PromoteKnob: 1},
			)
		}
	}
	return out
}

// propertySnapshots draws snapshots of many shapes: idle, busy, tiny,
// mixed node sizes, some nodes unschedulable (unless allSchedulable).
func propertySnapshots(seed uint64, n int, allSchedulable ...bool) []Snapshot {
	rng := rand.New(rand.NewPCG(seed, 99))
	out := make([]Snapshot, n)
	for i := range out {
		unsched := rng.Float64() * 0.3
		if len(allSchedulable) > 0 {
			unsched = 0
		}
		out[i] = randomSnapshot(rng, genOpts{
			nodes:         1 + rng.IntN(12),
			gpusPerNode:   1 + rng.IntN(8),
			jobs:          rng.IntN(40),
			busy:          rng.Float64(),
			unschedulable: unsched,
			mixedNodes:    rng.IntN(2) == 0,
		})
		out[i].Now = 1e6 * rng.Float64() * 1.2
	}
	return out
}

// TestInvariants: for random snapshots under every policy and mode, no GPU
// is given twice or taken from a job that keeps it, gangs are whole, no
// job lands on an unschedulable node or on a GPU that does not exist,
// every waiting job is explained once, and queue changes are sound.
func TestInvariants(t *testing.T) {
	snaps := propertySnapshots(1, 300)
	for _, cfg := range propertyConfigs() {
		sc := mustNew(t, cfg)
		for i, s := range snaps {
			d := sc.Schedule(s)
			if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
				t.Fatalf("%+v, snapshot %d:\n%s", cfg, i, joinProblems(p))
			}
			if p := internalProblems(sc, s); p != "" {
				t.Fatalf("%+v, snapshot %d: %s", cfg, i, p)
			}
		}
	}
}

// TestWorkConservation: under every policy but fifo, no job is left
// waiting while the GPUs left free could hold it. In nodes mode a job
// preempted in the pass is exempt: the GPUs it gave up may have gone to
// the job it made way for, and a job does not move within a pass.
func TestWorkConservation(t *testing.T) {
	snaps := propertySnapshots(2, 300)
	for _, cfg := range propertyConfigs() {
		if cfg.Policy == "fifo" || cfg.LocalityWaitS >= 0 && cfg.Placement != PlaceCount {
			continue
		}
		sc := mustNew(t, cfg)
		for i, s := range snaps {
			d := sc.Schedule(s)
			_, a := checkDecisions(s, cfg, d)
			if cfg.Placement != PlaceCount {
				a.preempt = nil // exempt
			}
			if p := unconserved(s, cfg, d, a); len(p) > 0 {
				t.Fatalf("%+v, snapshot %d:\n%s", cfg, i, joinProblems(p))
			}
		}
	}
}

// TestDeterminism: the same snapshot gives the same decisions, whatever
// the order of its jobs.
func TestDeterminism(t *testing.T) {
	snaps := propertySnapshots(3, 100)
	rng := rand.New(rand.NewPCG(7, 7))
	for _, cfg := range propertyConfigs() {
		sc := mustNew(t, cfg)
		for i, s := range snaps {
			first := normalize(sc.Schedule(s))
			if again := normalize(sc.Schedule(s)); !reflect.DeepEqual(first, again) {
				t.Fatalf("%+v, snapshot %d: two passes differ", cfg, i)
			}
			shuffled := s
			shuffled.Jobs = slices.Clone(s.Jobs)
			rng.Shuffle(len(shuffled.Jobs), func(a, b int) {
				shuffled.Jobs[a], shuffled.Jobs[b] = shuffled.Jobs[b], shuffled.Jobs[a]
			})
			if other := normalize(sc.Schedule(shuffled)); !reflect.DeepEqual(first, other) {
				t.Fatalf("%+v, snapshot %d: the order of jobs changes the decisions\n%+v\n%+v", cfg, i, first, other)
			}
		}
	}
}

// normalize sorts the decisions that follow the snapshot's job order.
func normalize(d Decisions) Decisions {
	slices.SortFunc(d.QueueChanges, func(a, b QueueChange) int { return int(a.JobID - b.JobID) })
	return d
}

// TestCountModeIsGreedy: in count mode, tiresias-l keeps running exactly
// the jobs that the Tiresias simulator's greedy pass keeps: all jobs in
// priority order, each taking its GPUs if enough are left.
func TestCountModeIsGreedy(t *testing.T) {
	cfg := Config{Policy: "tiresias-l", Placement: PlaceCount, OmitWaits: true}
	sc := mustNew(t, cfg)
	for i, s := range propertySnapshots(4, 500, true) {
		d := sc.Schedule(s)
		want := greedyCount(sc, s)
		var got []int64
		_, a := checkDecisions(s, cfg, d)
		for _, j := range s.Jobs {
			if (j.State == Running && a.preempt[j.ID].JobID == 0) || a.started[j.ID].JobID != 0 {
				got = append(got, j.ID)
			}
		}
		if !sameIDs(got, want) {
			t.Fatalf("snapshot %d: runs %v, greedy runs %v", i, sorted(got), sorted(want))
		}
	}
}

// greedyCount is the reference: order by (queue, running first,
// queue-entry time, ID), take what fits.
func greedyCount(sc *Scheduler, s Snapshot) []int64 {
	type k struct {
		q, run int
		since  float64
		id     int64
		gpus   int
	}
	var ks []k
	for _, j := range s.Jobs {
		q := levelOf(j.AttainedService, sc.thr)
		since := j.Queue.Since
		if q != j.Queue.Index {
			since = s.Now
		} else if since == 0 {
			since = j.SubmitTime
		}
		r := 1
		if j.State == Running {
			r = 0
		}
		ks = append(ks, k{q, r, since, j.ID, j.GPUs})
	}
	slices.SortFunc(ks, func(a, b k) int {
		switch {
		case a.q != b.q:
			return a.q - b.q
		case a.run != b.run:
			return a.run - b.run
		case a.since != b.since:
			return cmpFloat(a.since, b.since)
		}
		return int(a.id - b.id)
	})
	left := 0
	for _, n := range s.Nodes {
		if !n.Unschedulable {
			left += len(n.GPUs)
		}
	}
	var out []int64
	for _, x := range ks {
		if x.gpus > 0 && x.gpus <= left {
			left -= x.gpus
			out = append(out, x.id)
		}
	}
	return out
}

func sorted(v []int64) []int64 { v = slices.Clone(v); slices.Sort(v); return v }

func TestPropertyConfigsAreValid(t *testing.T) {
	for _, c := range propertyConfigs() {
		if _, err := New(c); err != nil {
			t.Error(fmt.Sprint(c, err))
		}
	}
}
