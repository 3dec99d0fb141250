package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkScheduleSharing is BenchmarkSchedule's busy 1,000-GPU case
// with every one-GPU job a sharing job (P up to 8 GiB, E up to 24 GiB on
// 80 GiB GPUs): the cost of co-location when it runs.
func BenchmarkScheduleSharing(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := randomSnapshot(rng, genOpts{nodes: 125, gpusPerNode: 8, jobs: 10000, busy: 0.97})
	for i := range s.Jobs {
		if j := &s.Jobs[i]; j.GPUs == 1 {
			j.Sharing, j.MemPersistentMiB, j.MemEphemeralMiB = true, 1+rng.Int64N(8192), 1+rng.Int64N(24576)
		}
	}
	for _, pol := range []string{"fifo", "fjf", "tiresias-l"} {
		for _, omit := range []bool{false, true} {
			name := fmt.Sprintf("1000gpus-10000jobs/%s", pol)
			if omit {
				name += "/omit-waits"
			}
			b.Run(name, func(b *testing.B) {
				sc, err := New(Config{Policy: pol, OmitWaits: omit})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				var d Decisions
				for b.Loop() {
					d = sc.Schedule(s)
				}
				b.ReportMetric(float64(len(d.Starts)), "starts")
			})
		}
	}
}
