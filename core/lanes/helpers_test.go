package lanes

import (
	"testing"

	"github.com/gpuportal/gpuportal/core/memest"
)

// job returns a job with declared P and E (MiB).
func job(id int64, p, e int64) Job {
	return Job{ID: id, Memory: memest.Estimate{PersistentMiB: p, EphemeralMiB: e, Source: memest.Declared}}
}

// noPad is a configuration without padding, so hand-derived sizes stay
// exact.
func noPad(pol Policy) Config { return Config{Policy: pol, Padding: memest.NoPadding} }

// mustGPU returns a new GPU or stops the test.
func mustGPU(t testing.TB, capacity int64, cfg Config) *GPU {
	t.Helper()
	g, err := NewGPU(0, capacity, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// mustAdmit admits j at time 0 or stops the test.
func mustAdmit(t testing.TB, g *GPU, j Job) Placement {
	t.Helper()
	p, err := g.Admit(j, 0)
	if err != nil {
		t.Fatalf("admit job %d: %v", j.ID, err)
	}
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
	return p
}

// laneSizes returns lane ID -> size.
func laneSizes(g *GPU) map[int]int64 {
	out := map[int]int64{}
	for _, l := range g.View().Lanes {
		out[l.ID] = l.SizeMiB
	}
	return out
}
