package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
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
		spec job.Spec
	}{
		{"command, not shared", job.Spec{JobID: 1, Command: []string{"python3", "train.py"}, GPUs: []int{0, 1}}},
		{"command of an owner", job.Spec{JobID: 4, Command: []string{"train"}, GPUs: []int{0}, Account: "alice"}},
		{"command, shared", job.Spec{JobID: 2, Command: []string{"train"}, GPUs: []int{3},
			Sharing: &job.Sharing{Memory: est, DurationS: 600, Iterations: 1000}}},
		{"simulated, shared", job.Spec{JobID: 3, GPUs: []int{0}, SimRemaining: 90 * time.Second,
			Memory:  gpu.SimMemory{PersistentMiB: 1587, EphemeralMiB: 5028, Iteration: 2 * time.Second},
			Sharing: &job.Sharing{Memory: est}}},
		{"command with its variables, folder and array task", job.Spec{JobID: 4, Command: []string{"train"}, GPUs: []int{0},
			Env: []string{"LR=0.1", "EMPTY="}, Dir: "/data/run", Array: &job.ArrayTask{ID: 4, Index: 3}, TimeLeft: 90 * time.Minute}},
		{"part of a run on two machines", job.Spec{JobID: 5, Command: []string{"torchrun"}, GPUs: []int{0, 1}, Name: "bert",
			Gang: &job.Gang{Nodes: []job.GangNode{{Name: "a", Addr: "10.0.0.1", GPUs: 2}, {Name: "b", Addr: "10.0.0.2", GPUs: 2}},
				Rank: 1, MasterPort: 29500, TasksPerGPU: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := roundTrip(t, FromSpec(tc.spec)).Spec()
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
	for _, ex := range []job.Exit{
		{Node: "n1", JobID: 7, ExitCode: 0, At: at},
		{Node: "n1", JobID: 7, ExitCode: -1, Err: "stopped by the agent: job 7 outgrew its Salus lane", At: at, Requeue: &bigger},
		{Node: "n1", JobID: 7, ExitCode: -1, Err: "terminated", At: at, Measured: &measured},
		{Node: "n1", JobID: 7, ExitCode: -1, Err: "time limit reached: stopped by its agent", At: at, EndedAs: job.TimedOut},
		{Node: "n1", JobID: 7, Run: 3, ExitCode: 0, At: at, Resume: &job.Resume{Run: 3, FromRun: 2, CheckpointAt: at.Add(-time.Minute)}},
		{Node: "n1", JobID: 7, Run: 3, ExitCode: 0, At: at, Resume: &job.Resume{Run: 3}},
	} {
		got := roundTrip(t, FromExit(ex)).Exit()
		if !reflect.DeepEqual(got, ex) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, ex)
		}
	}
}

func TestOldPeerIgnoresSharing(t *testing.T) {
	// A message of this version without the new fields decodes to a spec
	// that does not share, and one with them keeps older fields intact.
	var w JobSpec
	if err := json.Unmarshal([]byte(`{"job_id":4,"gpus":[0],"command":["train"]}`), &w); err != nil {
		t.Fatal(err)
	}
	if s := w.Spec(); s.Sharing != nil || s.JobID != 4 {
		t.Fatalf("spec %+v", s)
	}
	var e Exit
	if err := json.Unmarshal([]byte(`{"node":"n","job_id":4,"exit_code":1,"at":"2026-11-22T12:00:00Z"}`), &e); err != nil {
		t.Fatal(err)
	}
	if ex := e.Exit(); ex.Requeue != nil || ex.Measured != nil || ex.ExitCode != 1 {
		t.Fatalf("exit %+v", ex)
	}
}

func TestResourcesRoundTrip(t *testing.T) {
	spec := job.Spec{JobID: 4, Command: []string{"train"}, GPUs: []int{0, 1},
		Resources: &job.Resources{CPUMilli: 7500, MemMiB: 96000, PropCPUMilli: 6000, ProfileMaxMilli: 12000}}
	if back := roundTrip(t, FromSpec(spec)).Spec(); !reflect.DeepEqual(back, spec) {
		t.Errorf("spec %+v came back %+v", spec, back)
	}
	plain := job.Spec{JobID: 5, GPUs: []int{0}}
	if w := FromSpec(plain); w.Resources != nil || roundTrip(t, w).Spec().Resources != nil {
		t.Errorf("a spec without resources gained some: %+v", w)
	}
	u := job.Usage{JobID: 4, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), CPUMilli: 7500, MemMiB: 96000,
		UsedCPUMilli: 6100, UsedMemMiB: 40000, Note: job.NotEnforcedPrefix + "no permission",
		Profile: []job.ProfilePoint{{CPUMilli: 6000, Rate: 10}, {CPUMilli: 12000, Rate: 14.5}}}
	hb := roundTrip(t, Heartbeat{Nodes: []NodeSamples{{Node: "n0", Usage: FromUsage([]job.Usage{u})}}})
	if back := Usage(hb.Nodes[0].Usage)[0]; !reflect.DeepEqual(back, u) {
		t.Errorf("usage %+v came back %+v", u, back)
	}
}

func TestSpecAndExitRoundTrip(t *testing.T) {
	specs := []job.Spec{
		{JobID: 1, Run: 4, Command: []string{"python", "train.py"}, GPUs: []int{0, 3}},
		{JobID: 2, GPUs: []int{1}, SimRemaining: 90 * time.Second,
			Memory: gpu.SimMemory{PersistentMiB: 4000, EphemeralMiB: 2000, Iteration: 3 * time.Second}},
	}
	for _, s := range specs {
		got := FromSpec(s).Spec()
		if got.JobID != s.JobID || got.Run != s.Run || strings.Join(got.Command, " ") != strings.Join(s.Command, " ") ||
			len(got.GPUs) != len(s.GPUs) || got.SimRemaining != s.SimRemaining || got.Memory != s.Memory {
			t.Errorf("round trip of %+v gave %+v", s, got)
		}
	}
	ex := job.Exit{Node: "n", JobID: 3, Run: 2, ExitCode: -1, Err: "killed by killed", At: time.Unix(5, 0)}
	if got := FromExit(ex).Exit(); got.Node != ex.Node || got.JobID != ex.JobID || got.Run != ex.Run ||
		got.ExitCode != ex.ExitCode || got.Err != ex.Err || !got.At.Equal(ex.At) {
		t.Errorf("exit round trip: %+v", got)
	}
}

// An agent may say that a run ended timed out, and nothing else: a
// cancel is the server's to decide.
func TestExitEndedAsOnlyTimedOut(t *testing.T) {
	if e := (Exit{JobID: 1, EndedAs: "cancelled"}).Exit(); e.EndedAs != "" {
		t.Errorf("an agent's cancel was taken: %+v", e)
	}
}
