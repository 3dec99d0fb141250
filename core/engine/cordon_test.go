package engine

import (
	"errors"
	"testing"

	"github.com/gpuportal/gpuportal/core/job"
)

func TestCordonedNodeKeepsItsJobsAndTakesNoNewOnes(t *testing.T) {
	store := newMemStore(Job{ID: 1, GPUs: 1, SubmittedAt: t0}, Job{ID: 2, GPUs: 1, SubmittedAt: t0.Add(1)})
	a := newFakeNode("a", 1)
	e, _ := newTestEngine(t, store, a)
	mustPass(t, e) // job 1 runs on a
	if err := e.SetCordoned("a", true); err != nil {
		t.Fatal(err)
	}
	if err := e.SetCordoned("zzz", true); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("cordoning an unknown node: %v", err)
	}
	b := newFakeNode("b", 1)
	e.nodes["b"] = b
	if err := e.SetCordoned("b", true); err != nil {
		t.Fatal(err)
	}
	mustPass(t, e)
	if store.state(1) != job.Running || len(a.stops) != 0 {
		t.Errorf("cordon touched the running job: %s, stops %v", store.state(1), a.stops)
	}
	if len(b.starts) != 0 {
		t.Errorf("a cordoned node got %d starts", len(b.starts))
	}
	st := e.NodeStatuses()
	if len(st) != 2 || !st[0].Cordoned || st[0].Draining || !st[1].Cordoned {
		t.Errorf("statuses = %+v", st)
	}
	// Slurm resuming a node it had drained leaves the admin's cordon.
	if err := e.SetDraining("b", false); err != nil {
		t.Fatal(err)
	}
	mustPass(t, e)
	if len(b.starts) != 0 {
		t.Errorf("undraining removed the cordon: %d starts", len(b.starts))
	}
	if err := e.SetCordoned("b", false); err != nil {
		t.Fatal(err)
	}
	mustPass(t, e)
	if len(b.starts) != 1 {
		t.Errorf("uncordoned node got %d starts, want 1", len(b.starts))
	}
}
