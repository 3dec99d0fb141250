package sim

import (
	"math"
	"testing"

	"github.com/gpuportal/gpuportal/core/trace"
)

func TestJobIndex(t *testing.T) {
	for _, c := range []struct {
		name  string
		ids   []int64
		dense bool
	}{
		{"from zero", []int64{0, 1, 2, 3}, true},
		{"from one, shuffled", []int64{4, 1, 3, 2}, true},
		{"negative", []int64{-5, -1, 3}, true},
		{"sparse", []int64{1, 1000, 1 << 40}, false},
		{"extremes", []int64{math.MinInt64, math.MaxInt64}, false},
		{"one", []int64{math.MaxInt64}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			jobs := make([]trace.Job, len(c.ids))
			js := make([]job, len(c.ids))
			for i, id := range c.ids {
				jobs[i].ID = id
			}
			x := newJobIndex(jobs)
			if (x.m == nil) != c.dense {
				t.Fatalf("dense %v, want %v", x.m == nil, c.dense)
			}
			for i, id := range c.ids {
				if x.get(id) != nil {
					t.Fatalf("job %d found before it was put", id)
				}
				x.put(id, &js[i])
			}
			for i, id := range c.ids {
				if x.get(id) != &js[i] {
					t.Fatalf("job %d: got another", id)
				}
			}
			for _, id := range []int64{math.MinInt64, -6, 5, 1 << 41, math.MaxInt64 - 1} {
				found := false
				for _, have := range c.ids {
					found = found || have == id
				}
				if !found && x.get(id) != nil {
					t.Fatalf("job %d found though absent", id)
				}
			}
		})
	}
}
