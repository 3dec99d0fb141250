package sched

import "testing"

func fraction(f float64) func(*Job) { return func(j *Job) { j.GPUFraction = f } }

// TestSharedGPUsCountByShare checks that the pass counts a running
// sharing job for its share of the GPU (usage.Shares), as the portal
// does, in what a team holds: borrowed, reasons and reclaims.
func TestSharedGPUsCountByShare(t *testing.T) {
	gpu0 := on("node-0", 0)
	old := startedAt(0)
	runPolicyCases(t, "fjf", []policyCase{{
		name:  "three jobs sharing one GPU hold one GPU, within a guarantee of one",
		now:   1000,
		nodes: nodes(2),
		teams: []Team{{Name: "a", GuaranteeGPUs: 1}},
		jobs: []Job{
			run(1, 0, gpu0, of("a"), shares(100, 100), old),
			run(2, 1, gpu0, of("a"), shares(100, 100), old),
			run(3, 2, gpu0, of("a"), shares(100, 100), old),
		},
		check: borrowed(),
	}, {
		name:   "a job started on a shared GPU is marked by the shares after the pass",
		now:    1000,
		nodes:  nodes(1),
		teams:  []Team{{Name: "a", GuaranteeGPUs: 1}},
		jobs:   []Job{run(1, 0, gpu0, of("a"), shares(100, 100), old), pend(2, 1, 1, of("a"), shares(100, 100))},
		starts: []int64{2},
		check:  borrowed(),
	}, {
		name:  "asked fractions count as asked",
		now:   1000,
		nodes: nodes(2),
		teams: []Team{{Name: "a", GuaranteeGPUs: 1}, {Name: "b", GuaranteeGPUs: 1}},
		jobs: []Job{
			run(1, 0, gpu0, of("a"), shares(100, 100), fraction(0.25), old),
			run(2, 1, gpu0, of("a"), shares(100, 100), fraction(0.5), old),
			run(3, 2, on("node-0", 1), of("b"), old),
			pend(4, 1, 3, of("a")),
		},
		waits: map[int64]WaitCause{4: WaitTeamShare},
		check: all(borrowed(), reason(4, WaitTeamShare,
			"needs 1 GPU; 0 free; team a holds 0.75 of its 1 guaranteed GPUs, so this job would borrow: it may take idle GPUs, never other teams' jobs; first in line")),
	}, {
		name:  "a team within its guarantee by shares is not reclaimed",
		now:   1000,
		nodes: nodes(2),
		teams: []Team{{Name: "a", GuaranteeGPUs: 2}, {Name: "b", GuaranteeGPUs: 1}},
		jobs: []Job{
			run(1, 0, gpu0, of("a"), shares(100, 100), old),
			run(2, 1, gpu0, of("a"), shares(100, 100), old),
			run(3, 2, gpu0, of("a"), shares(100, 100), old),
			run(4, 3, on("node-0", 1), of("a"), old),
			pend(5, 1, 4, of("b")),
		},
		waits: map[int64]WaitCause{5: WaitCapacity},
		check: all(borrowed(), reason(5, WaitCapacity,
			"needs 1 GPU; 0 free; team b holds 0 of its 1 guaranteed GPUs, but no other team has lent it GPUs it could reclaim; first in line")),
	}})
}
