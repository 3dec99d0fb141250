package engine

import (
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// smallNode is a fake machine with one 16 GiB GPU.
type smallNode struct{ *fakeNode }

func (n smallNode) Devices() []gpu.Device { return []gpu.Device{{Index: 0, MemMiB: 16 << 10}} }

func TestFractionOfSchedulableGPUsOnly(t *testing.T) {
	// A quarter of a GPU: of the 16 GiB GPU while it is in service
	// (4,096 MiB, P 20% rounded up, 820, padded: ceil(1.1 x 820) = 902),
	// else of the 80 GiB ones (20,480 MiB: P 4,506 as in
	// TestSharingSnapshot).
	tests := []struct {
		name    string
		setup   func(t *testing.T, e *Engine)
		gpuMiB  int64
		persist int64
	}{
		{"all in service", func(*testing.T, *Engine) {}, 16 << 10, 902},
		{"small GPU out of service", func(_ *testing.T, e *Engine) {
			e.health.observe("small", []gpu.Sample{{Index: 0}}, t0)
			e.health.observe("small", []gpu.Sample{{Index: 0, ECCErrors: 1}}, t0)
		}, 80 << 10, 4506},
		{"small node cordoned", func(t *testing.T, e *Engine) {
			if err := e.SetCordoned("small", true); err != nil {
				t.Fatal(err)
			}
		}, 80 << 10, 4506},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := Job{ID: 1, SubmittedAt: t0, GPUs: 1, Sharing: true, GPUFraction: 0.25, Command: []string{"train"}}
			e, _ := newTestEngine(t, newMemStore(j), newFakeNode("n1", 2))
			e.nodes["small"] = smallNode{newFakeNode("small", 1)}
			tc.setup(t, e)
			if got := e.smallestGPU(); got != tc.gpuMiB {
				t.Fatalf("smallest GPU at start %d MiB, want %d", got, tc.gpuMiB)
			}
			snap, _ := e.snapshot([]Job{j}, t0)
			if got := snap.Jobs[0].MemPersistentMiB; got != tc.persist {
				t.Fatalf("padded P %d MiB, want %d", got, tc.persist)
			}
		})
	}
}
