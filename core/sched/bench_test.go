package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkSchedule measures one pass over a cluster whose GPUs are
// nearly all held, with most jobs waiting: the busy case.
func BenchmarkSchedule(b *testing.B) {
	sizes := []struct{ nodes, jobs int }{{125, 10000}, {1250, 100000}}
	for _, size := range sizes {
		s := randomSnapshot(rand.New(rand.NewPCG(1, 2)), genOpts{nodes: size.nodes, gpusPerNode: 8, jobs: size.jobs, busy: 0.97})
		for _, pol := range Policies() {
			for _, omit := range []bool{false, true} {
				name := fmt.Sprintf("%dgpus-%djobs/%s", size.nodes*8, size.jobs, pol)
				if omit {
					name += "/omit-waits"
				}
				b.Run(name, func(b *testing.B) {
					sc, err := New(Config{Policy: pol, OmitWaits: omit})
					if err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					for b.Loop() {
						sc.Schedule(s)
					}
				})
			}
		}
	}
}
