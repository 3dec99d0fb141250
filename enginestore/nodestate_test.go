package enginestore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

func TestNodeStatesOutliveTheStore(t *testing.T) {
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
		ms, err := models.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		s := New(ms)
		steps := []func() error{
			func() error { return s.SetNodeCordoned(ctx, "n1", true, at) },
			func() error { return s.SetNodeDraining(ctx, "n1", true, at) },
			func() error { return s.SetNodeCordoned(ctx, "n1", false, at) }, // the drain stays
			func() error { return s.SetNodeDraining(ctx, "n2", true, at) },
			func() error { return s.SetNodeDraining(ctx, "n2", false, at) },
			func() error { return s.SetNodeCordoned(ctx, "n3", true, at) },
			func() error {
				return s.RecordGPUFault(ctx, engine.GPUFault{Ref: gpu.Ref{Node: "n1", Index: 2}, Reason: "XID 48", At: at})
			},
			func() error { // replaces the first fault of n1/2
				return s.RecordGPUFault(ctx, engine.GPUFault{Ref: gpu.Ref{Node: "n1", Index: 2}, Reason: "XID 79", At: at.Add(time.Minute)})
			},
			func() error {
				return s.RecordGPUFault(ctx, engine.GPUFault{Ref: gpu.Ref{Node: "n1", Index: 0}, Reason: "ECC", At: at})
			},
			func() error {
				return s.RecordGPUFault(ctx, engine.GPUFault{Ref: gpu.Ref{Node: "n3", Index: 1}, Reason: "ECC", At: at})
			},
			func() error { return s.DeleteGPUFault(ctx, "n3", 1) },
			func() error { return s.DeleteGPUFault(ctx, "n3", 5) }, // not out of service: no error
		}
		for i, f := range steps {
			if err := f(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		s.Close()

		// A restarted server (or another replica) reads what was recorded.
		ms, err = models.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		s = New(ms)
		defer s.Close()
		got, err := s.NodeStates(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := engine.NodeStates{
			Cordoned: map[string]bool{"n3": true},
			Draining: map[string]bool{"n1": true},
			Faults: []engine.GPUFault{
				{Ref: gpu.Ref{Node: "n1", Index: 0}, Reason: "ECC", At: at},
				{Ref: gpu.Ref{Node: "n1", Index: 2}, Reason: "XID 79", At: at.Add(time.Minute)},
			},
		}
		for i := range got.Faults {
			got.Faults[i].At = got.Faults[i].At.UTC()
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("node states = %+v\nwant %+v", got, want)
		}
	})
}
