package lanes

import (
	"testing"

	"github.com/gpuportal/gpuportal/core/memest"
)

// BenchmarkPool measures the lane manager alone: 2,000 jobs of mixed
// sizes submitted to 32 GPUs of 16 GiB, admitted, iterated (grant and
// finish) and released, 100 at a time on the cluster.
//
//	go test -run '^$' -bench Pool ./core/lanes
func BenchmarkPool(b *testing.B) {
	caps := make([]int64, 32)
	for i := range caps {
		caps[i] = 16384
	}
	for b.Loop() {
		p, err := NewPool(caps, Config{Policy: Fair})
		if err != nil {
			b.Fatal(err)
		}
		for id := int64(1); id <= 2000; id++ {
			now := float64(id)
			e := 1000 + 1500*(id%7)
			if err := p.Submit(Job{ID: id, Memory: memest.Estimate{PersistentMiB: e / 5, EphemeralMiB: e}}, now); err != nil {
				b.Fatal(err)
			}
			for _, pl := range p.Schedule(now) {
				if err := p.Request(pl.Job, 0); err != nil {
					b.Fatal(err)
				}
			}
			for _, g := range p.Grant(now) {
				if _, err := p.Finish(g.Job, now+0.5, e); err != nil {
					b.Fatal(err)
				}
				_ = p.Request(g.Job, 0)
			}
			if old := id - 100; old > 0 {
				if p.Cancel(old) != nil {
					_ = p.Release(old)
				}
			}
		}
	}
}
