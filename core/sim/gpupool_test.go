package sim

import (
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/trace"
)

// TestGPUPoolFinds: GPUs are found by node and index, out-of-range ones
// and unknown nodes are refused, and a name given to two nodes finds the
// later node's GPUs, then the earlier's past it, as a map by reference
// did.
func TestGPUPoolFinds(t *testing.T) {
	for _, c := range []struct {
		name  string
		nodes []trace.Node
		ref   gpu.Ref
		slot  int // -1: refused
	}{
		{"first", []trace.Node{{Name: "a", GPUs: 2}, {Name: "b", GPUs: 4}}, gpu.Ref{Node: "a", Index: 1}, 1},
		{"second", []trace.Node{{Name: "a", GPUs: 2}, {Name: "b", GPUs: 4}}, gpu.Ref{Node: "b", Index: 3}, 5},
		{"past the node", []trace.Node{{Name: "a", GPUs: 2}, {Name: "b", GPUs: 4}}, gpu.Ref{Node: "a", Index: 2}, -1},
		{"negative", []trace.Node{{Name: "a", GPUs: 2}}, gpu.Ref{Node: "a", Index: -1}, -1},
		{"unknown", []trace.Node{{Name: "a", GPUs: 2}}, gpu.Ref{Node: "c", Index: 0}, -1},
		{"twice, later", []trace.Node{{Name: "a", GPUs: 4}, {Name: "a", GPUs: 2}}, gpu.Ref{Node: "a", Index: 1}, 5},
		{"twice, earlier", []trace.Node{{Name: "a", GPUs: 4}, {Name: "a", GPUs: 2}}, gpu.Ref{Node: "a", Index: 3}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, pool := buildCluster(c.nodes)
			for range 2 { // the second time through the node found last
				i, ok := pool.slot(c.ref)
				if c.slot < 0 && ok || c.slot >= 0 && (!ok || i != c.slot) {
					t.Fatalf("slot(%v) = %d, %v; want %d", c.ref, i, ok, c.slot)
				}
			}
			err := pool.take(1, []gpu.Ref{c.ref}, false)
			if (err == nil) != (c.slot >= 0) {
				t.Fatalf("take: %v", err)
			}
			if err == nil {
				if pool.free != pool.total-1 || pool.held[c.slot] != 1 {
					t.Fatalf("after take: free %d of %d, held %v", pool.free, pool.total, pool.held)
				}
				pool.release(1, []gpu.Ref{c.ref})
				if pool.free != pool.total || pool.held[c.slot] != 0 {
					t.Fatalf("after release: free %d of %d, held %v", pool.free, pool.total, pool.held)
				}
			}
		})
	}
}
