package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// TestSharingProperties applies the decisions of every pass to a small
// cluster over random sequences of arrivals, completions and passes,
// under every policy, with and without teams, under both share
// placements. After every pass: the
// decisions keep the general invariants (checkDecisions); every GPU that
// holds several jobs holds sharing jobs only, and they meet the safety
// condition; and the same snapshot, its jobs in another order, gives the
// same decisions to a fresh scheduler.
func TestSharingProperties(t *testing.T) {
	for _, pol := range Policies() {
		for variant := range 5 {
			cfg := Config{Policy: pol, OmitWaits: variant == 1, NoPreemption: variant == 3}
			if variant == 4 {
				cfg.SharePlacement = ShareFullestFirst
			}
			teams := variant >= 2
			t.Run(fmt.Sprintf("%s/%d", pol, variant), func(t *testing.T) {
				shared := 0
				for seed := range uint64(4) {
					shared += sharingSequence(t, cfg, teams, seed)
				}
				if shared == 0 {
					t.Error("no GPU was ever shared: the test tests nothing")
				}
			})
		}
	}
}

// sharingSequence runs one random sequence of passes and returns how
// many times, after a pass, a GPU held several jobs.
func sharingSequence(t *testing.T, cfg Config, teams bool, seed uint64) int {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 5))
	sc := mustNew(t, cfg)
	ns := shareNodes(1+rng.IntN(4), 1+rng.IntN(4), 1+rng.IntN(2))
	if rng.IntN(3) == 0 {
		ns[0].GPUs[0].MemMiB = 0 // unknown capacity: never shared
	}
	var tl []Team
	if teams {
		tl = []Team{{Name: "a", GuaranteeGPUs: 2, MaxGPUsPerUser: 3}, {Name: "b", GuaranteeGPUs: 2}}
	}
	var jobs []Job
	now, nextID, shared := 0.0, int64(1), 0
	for step := range 60 {
		now += 10 + rng.Float64()*300
		// Completions: each running job ends with probability 1/5.
		jobs = slices.DeleteFunc(jobs, func(j Job) bool { return j.State == Running && rng.IntN(5) == 0 })
		for range rng.IntN(5) {
			j := Job{ID: nextID, SubmitTime: now, GPUs: 1 + rng.IntN(3), Model: genModels[rng.IntN(len(genModels))],
				Team: []string{"a", "b", "c"}[rng.IntN(3)], User: []string{"u", "v"}[rng.IntN(2)]}
			nextID++
			if rng.IntN(3) > 0 {
				j.GPUs, j.Sharing = 1, true
				j.MemPersistentMiB, j.MemEphemeralMiB = rng.Int64N(6000), rng.Int64N(12000)
				if rng.IntN(10) == 0 {
					j.GPUs = 2 // a sharing job on two GPUs: exclusive
				}
			}
			if rng.IntN(2) == 0 {
				j.DurationS = 100 + rng.Float64()*5000
			}
			jobs = append(jobs, j)
		}
		for i := range jobs {
			if j := &jobs[i]; j.State == Running {
				j.ExecutedS += 100
				j.AttainedService += 100 * float64(j.GPUs)
			}
		}
		s := Snapshot{Now: now, Nodes: ns, Jobs: slices.Clone(jobs), Teams: tl}
		d := sc.Schedule(s)
		where := fmt.Sprintf("%+v teams %v seed %d step %d", cfg, teams, seed, step)
		if p, _ := checkDecisions(s, cfg, d); len(p) > 0 {
			t.Fatalf("%s:\n%s", where, joinProblems(p))
		}
		shuffled := slices.Clone(jobs)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		again := mustNew(t, cfg).Schedule(Snapshot{Now: now, Nodes: ns, Jobs: shuffled, Teams: tl})
		if fmt.Sprintf("%+v", d) != fmt.Sprintf("%+v", again) {
			t.Fatalf("%s: decisions depend on the jobs' order:\n%+v\n%+v", where, d, again)
		}
		jobs = applyDecisions(jobs, d, now)
		p, n := gpuSharingProblems(ns, jobs)
		if len(p) > 0 {
			t.Fatalf("%s:\n%s", where, joinProblems(p))
		}
		shared += n
	}
	return shared
}

// applyDecisions carries out d on jobs at now, as the engine would.
func applyDecisions(jobs []Job, d Decisions, now float64) []Job {
	at := map[int64]int{}
	for i := range jobs {
		at[jobs[i].ID] = i
	}
	for _, p := range d.Preempts {
		j := &jobs[at[p.JobID]]
		j.State, j.Placement = Pending, nil
	}
	for _, st := range d.Starts {
		j := &jobs[at[st.JobID]]
		j.State, j.Placement, j.LastStartTime = Running, st.GPUs, now
	}
	for _, qc := range d.QueueChanges {
		jobs[at[qc.JobID]].Queue = qc.State
	}
	return jobs
}

// gpuSharingProblems checks every GPU of the cluster: several jobs on one
// GPU are all sharing jobs, on a GPU of known memory, and meet the safety
// condition. It also returns how many GPUs hold several jobs.
func gpuSharingProblems(ns []Node, jobs []Job) ([]string, int) {
	on := map[gpu.Ref][]*Job{}
	for i := range jobs {
		for _, g := range jobs[i].Placement {
			on[g] = append(on[g], &jobs[i])
		}
	}
	var out []string
	shared := 0
	for _, n := range ns {
		for _, g := range n.GPUs {
			ref := gpu.Ref{Node: n.Name, Index: g.Index}
			js := on[ref]
			if len(js) < 2 {
				continue
			}
			shared++
			var sumP, maxE int64
			for _, j := range js {
				if !sharesGPU(j) {
					out = append(out, fmt.Sprintf("GPU %v holds %d jobs, among them job %d, which does not share", ref, len(js), j.ID))
				}
				sumP += j.MemPersistentMiB
				maxE = max(maxE, j.MemEphemeralMiB)
			}
			if sumP+maxE > g.MemMiB {
				out = append(out, fmt.Sprintf("GPU %v of %d MiB: %d jobs need P %d + E %d MiB", ref, g.MemMiB, len(js), sumP, maxE))
			}
		}
	}
	return out, shared
}
