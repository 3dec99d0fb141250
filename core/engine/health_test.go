package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

// sickNode is a fakeNode whose GPUs report error counters.
type sickNode struct {
	*fakeNode
	errs map[int]gpu.Sample // by GPU index: ECCErrors, XIDErrors, LastXID
}

func (n *sickNode) Sample(now time.Time) []gpu.Sample {
	out := make([]gpu.Sample, n.gpus)
	for i := range out {
		e := n.errs[i]
		out[i] = gpu.Sample{At: now, Index: i, MemMiB: 80 << 10, ECCErrors: e.ECCErrors, XIDErrors: e.XIDErrors, LastXID: e.LastXID}
	}
	return out
}

func TestObserveRules(t *testing.T) {
	s := func(ecc, xids uint64, last int) []gpu.Sample {
		return []gpu.Sample{{Index: 3, ECCErrors: ecc, XIDErrors: xids, LastXID: last}}
	}
	tests := []struct {
		name       string
		first, now []gpu.Sample
		want       string // the fault's reason; empty: none
	}{
		{"errors before the first reading are its baseline", s(5, 2, 48), s(5, 2, 48), ""},
		{"a new XID takes the GPU out of service", s(0, 0, 0), s(0, 1, 79), "GPU n/3 reported XID 79 (GPU fell off the bus)"},
		{"new ECC errors take it out of service", s(1, 0, 0), s(3, 0, 0), "GPU n/3 reported 2 uncorrectable ECC error(s)"},
		{"an XID is named before ECC errors", s(0, 0, 0), s(1, 1, 48), "XID 48 (double-bit ECC error)"},
		{"counters that go down are a restart, not a fault", s(4, 4, 79), s(0, 0, 0), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h health
			if got := h.observe("n", tc.first, t0); len(got) != 0 {
				t.Fatalf("first reading gave faults %+v", got)
			}
			got := h.observe("n", tc.now, t0.Add(time.Second))
			if tc.want == "" {
				if len(got) != 0 {
					t.Errorf("faults %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0].Reason, tc.want) || got[0].Index != 3 {
				t.Errorf("faults %+v, want one saying %q", got, tc.want)
			}
			if _, ok := h.fault("n", 3); !ok {
				t.Error("the GPU is not recorded as out of service")
			}
		})
	}
}

func TestJobFailingOnAFailedGPUIsRequeuedWithoutARetry(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0})
	fake := newFakeNode("n0", 2)
	e, clock := newTestEngine(t, store, fake)
	n := &sickNode{fakeNode: fake, errs: map[int]gpu.Sample{}}
	e.nodes["n0"] = n
	e.cfg.MaxRetries = 0 // a failure of the job's own would end it
	mustPass(t, e)
	if len(fake.starts) != 1 || fake.starts[0].GPUs[0] != 0 {
		t.Fatalf("starts = %+v, want job 1 on GPU 0", fake.starts)
	}
	// GPU 0 falls off the bus; the job dies with it.
	clock.t = clock.t.Add(10 * time.Second)
	n.errs[0] = gpu.Sample{XIDErrors: 1, LastXID: 79}
	delete(fake.running, 1)
	e.testExit(context.Background(), exit("n0", 1, 1, clock.t))
	const want = "GPU n0/0 reported XID 79 (GPU fell off the bus)"
	if store.state(1) != job.Queued || !strings.Contains(store.reason[1], want) {
		t.Fatalf("state %s reason %q; want queued saying %q", store.state(1), store.reason[1], want)
	}
	if store.jobs[1].Failures != 0 {
		t.Errorf("the GPU's failure counted against the job: %d failures", store.jobs[1].Failures)
	}
	if got := e.Stats().RequeuedBy[RequeueGPUFault]; got != 1 {
		t.Errorf("requeues for a GPU fault: %d, want 1", got)
	}
	faults := e.GPUFaults()
	if len(faults) != 1 || faults[0].Node != "n0" || faults[0].Index != 0 {
		t.Fatalf("faults = %+v, want GPU n0/0", faults)
	}
	// No new job on the failed GPU: the job runs again on GPU 1.
	mustPass(t, e)
	if len(fake.starts) != 2 || fake.starts[1].GPUs[0] != 1 {
		t.Fatalf("starts = %+v, want the second on GPU 1", fake.starts)
	}
	if err := e.ClearGPUFault("n0", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.ClearGPUFault("n0", 0); !errors.Is(err, ErrGPUHealthy) {
		t.Errorf("clearing a healthy GPU: %v", err)
	}
	if len(e.GPUFaults()) != 0 {
		t.Errorf("faults after clearing: %+v", e.GPUFaults())
	}
}

func TestFailureOnAnotherGPUIsTheJobs(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0})
	fake := newFakeNode("n0", 2)
	e, clock := newTestEngine(t, store, fake)
	n := &sickNode{fakeNode: fake, errs: map[int]gpu.Sample{}}
	e.nodes["n0"] = n
	mustPass(t, e)
	n.errs[1] = gpu.Sample{ECCErrors: 1} // not the job's GPU
	e.testExit(context.Background(), exit("n0", 1, 2, clock.t.Add(time.Minute)))
	if store.state(1) != job.Failed || !strings.Contains(store.reason[1], "exit code 2") {
		t.Errorf("state %s reason %q; want failed with exit code 2", store.state(1), store.reason[1])
	}
	if f := e.GPUFaults(); len(f) != 1 || f[0].Index != 1 {
		t.Errorf("faults = %+v, want GPU 1", f)
	}
}
