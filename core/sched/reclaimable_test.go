package sched

import (
	"math/rand/v2"
	"testing"
)

// TestReclaimableUnlessDemoted holds the per-queue count of what
// preemption frees under the reference's list order (reclaimable,
// runningFirstUnlessDemoted) to the count by comparing a pending job
// with every running job, on random snapshots in which some jobs are
// demoted in the pass, in both placements.
func TestReclaimableUnlessDemoted(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 6))
	for _, placement := range []string{PlaceNodes, PlaceCount} {
		sc := mustNew(t, Config{Policy: "tiresias-l", Reference: true, Placement: placement})
		if !sc.pol.runningFirstUnlessDemoted {
			t.Fatal("tiresias-l's reference rule does not count per queue")
		}
		demoted, checked := 0, 0
		for range 300 {
			s := randomSnapshot(rng, genOpts{nodes: 4, gpusPerNode: 8, jobs: 30, busy: 0.8})
			for i := range s.Jobs {
				if j := &s.Jobs[i]; j.Queue.Index > 0 && rng.IntN(2) == 0 {
					j.Queue.Index-- // demoted in the pass
					if j.State == Running {
						demoted++
					}
				}
			}
			p := new(pass)
			p.snap = s
			p.sc, p.pol, p.s, p.now = sc, sc.pol, &p.snap, s.Now
			p.count = placement == PlaceCount
			p.ownPreempt, p.preempt, p.track = true, true, true
			p.load()
			p.classOrder()
			for k := range p.ents {
				e := &p.ents[k]
				got := p.reclaimable(e)
				p.keyRunning()
				want := 0
				for i := range p.rents {
					if r := &p.runs[p.rents[i].run]; r.state == runOpen && compareEntries(&p.rents[i], e) > 0 {
						want += int(r.n)
					}
				}
				if got != want {
					t.Fatalf("%s: pending job %d in queue %d: reclaimable %d, by comparison %d", placement, e.id, e.queue, got, want)
				}
				checked++
			}
		}
		if demoted == 0 || checked == 0 {
			t.Fatalf("%s: %d running jobs demoted, %d pending jobs checked: the test proves nothing", placement, demoted, checked)
		}
	}
}
