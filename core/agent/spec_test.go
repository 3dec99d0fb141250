package agent

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/memest"
)

// roundTrip encodes v as the wire does (JSON) and decodes it into a new T.
func roundTrip[T any](t *testing.T, v T) T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return out
}

func TestSpecRoundTrip(t *testing.T) {
	est := memest.Estimate{PersistentMiB: 1587, EphemeralMiB: 5028, Source: memest.Catalogue}
	tests := []struct {
		name string
		spec Spec
	}{
		{"command, not shared", Spec{JobID: 1, Command: []string{"python3", "train.py"}, GPUs: []int{0, 1}}},
		{"command, shared", Spec{JobID: 2, Command: []string{"train"}, GPUs: []int{3},
			Sharing: &Sharing{Memory: est, DurationS: 600, Iterations: 1000}}},
		{"simulated, shared", Spec{JobID: 3, GPUs: []int{0}, SimRemaining: 90 * time.Second,
			Memory:  gpu.SimMemory{PersistentMiB: 1587, EphemeralMiB: 5028, Iteration: 2 * time.Second},
			Sharing: &Sharing{Memory: est}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := SpecFromWire(roundTrip(t, tc.spec.Wire()))
			if !reflect.DeepEqual(got, tc.spec) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tc.spec)
			}
		})
	}
}

func TestExitRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	bigger := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 9000, Source: memest.Measured}
	measured := memest.Estimate{PersistentMiB: 1000, EphemeralMiB: 2600, Source: memest.Measured}
	for _, ex := range []Exit{
		{Node: "n1", JobID: 7, ExitCode: 0, At: at},
		{Node: "n1", JobID: 7, ExitCode: -1, Err: "stopped by the agent: job 7 outgrew its Salus lane", At: at, Requeue: &bigger},
		{Node: "n1", JobID: 7, ExitCode: -1, Err: "terminated", At: at, Measured: &measured},
	} {
		got := ExitFromWire(roundTrip(t, ex.Wire()))
		if !reflect.DeepEqual(got, ex) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, ex)
		}
	}
}

func TestOldPeerIgnoresSharing(t *testing.T) {
	// A message of this version without the new fields decodes to a spec
	// that does not share, and one with them keeps older fields intact.
	var w wire.JobSpec
	if err := json.Unmarshal([]byte(`{"job_id":4,"gpus":[0],"command":["train"]}`), &w); err != nil {
		t.Fatal(err)
	}
	if s := SpecFromWire(w); s.Sharing != nil || s.JobID != 4 {
		t.Fatalf("spec %+v", s)
	}
	var e wire.Exit
	if err := json.Unmarshal([]byte(`{"node":"n","job_id":4,"exit_code":1,"at":"2026-11-22T12:00:00Z"}`), &e); err != nil {
		t.Fatal(err)
	}
	if ex := ExitFromWire(e); ex.Requeue != nil || ex.Measured != nil || ex.ExitCode != 1 {
		t.Fatalf("exit %+v", ex)
	}
}
