package engine

import (
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/synergy"
)

// TestEngineDeclaredProfileBeatsHistoryAndCatalogue: a profile the user
// declared is the one the scheduler allocates by, before what history
// learned of the model and before the catalogue; a job with one is never
// asked to be profiled, and a curve its agent reports anyway is not
// learned for the model.
func TestEngineDeclaredProfileBeatsHistoryAndCatalogue(t *testing.T) {
	// The user says this resnet is not CPU-bound (its data is preprocessed).
	declared := &synergy.Profile{Family: "declared", CPU: synergy.Curve{{X: 0.5, Speed: 0.9}, {X: 1, Speed: 1}}}
	learned := synergy.Profile{Family: "measured", CPU: synergy.Curve{{X: 0, Speed: 0}, {X: 8, Speed: 1}}}

	t.Run("declared beats history, no profiling", func(t *testing.T) {
		store := &notingStore{memStore: newMemStore(
			Job{ID: 1, GPUs: 2, Model: "resnet50", BatchSize: 64, SimDuration: 100, SubmittedAt: t0, CPUProfile: declared},
		), notes: map[int64][]string{}, profiles: []synergy.LearnedProfile{{Model: "resnet50", Batch: 64, Profile: learned}}}
		n := &usageNode{fakeNode: newFakeNode("n0", 8), resized: map[int64]job.Resources{}}
		e := newAllocEngine(t, store, sched.AllocProportional, n)
		mustPass(t, e)
		if len(n.starts) != 1 || n.starts[0].Resources == nil {
			t.Fatalf("starts %+v", n.starts)
		}
		// 24 idle cores on the node: a job of unknown sensitivity would
		// be profiled with them (TestEngineProportionalAndProfileRequest).
		if r := n.starts[0].Resources; r.ProfileMaxMilli != 0 || r.CPUMilli != 8000 {
			t.Errorf("resources %+v: want the 8-core share and no profiling request", r)
		}
		jr, ok := e.JobResources(1)
		if !ok || jr.ProfileSource != synergy.SourceDeclared || jr.Profile.Family != "declared" || jr.Profile.CPU.At(0.5) != 0.9 {
			t.Fatalf("job resources %+v, %v: want the declared profile", jr, ok)
		}
		n.usage = []job.Usage{{JobID: 1, CPUMilli: 8000, Enforced: true,
			Profile: []job.ProfilePoint{{CPUMilli: 8000, Rate: 10}, {CPUMilli: 16000, Rate: 30}}}}
		mustPass(t, e)
		if len(store.profiles) != 1 {
			t.Errorf("stored profiles %+v: a declared job's curve was learned", store.profiles)
		}
	})

	t.Run("declared beats the catalogue", func(t *testing.T) {
		store := newMemStore(
			Job{ID: 1, GPUs: 4, Model: "resnet50", SimDuration: 100, SubmittedAt: t0, CPUProfile: declared},
			Job{ID: 2, GPUs: 4, Model: "resnet50", SimDuration: 100, SubmittedAt: t0.Add(time.Second)},
		)
		n := newFakeNode("n0", 8)
		e := newAllocEngine(t, store, sched.AllocSynergy, n)
		mustPass(t, e)
		res := map[int64]*job.Resources{}
		for _, s := range n.starts {
			res[s.JobID] = s.Resources
		}
		// 32 cores for 8 GPUs, 16 each in proportion: the declared job
		// needs 1 core per GPU, the catalogue's image CNN takes the rest.
		if r1, r2 := res[1], res[2]; r1 == nil || r2 == nil || r1.CPUMilli >= 16000 || r2.CPUMilli <= 16000 {
			t.Fatalf("resources declared %+v, catalogue %+v: want cores moved to the catalogue's image CNN", r1, r2)
		}
		if r := res[1]; r.ProfileMaxMilli != 0 {
			t.Errorf("declared job asked to be profiled: %+v", r)
		}
		jr1, _ := e.JobResources(1)
		jr2, _ := e.JobResources(2)
		if jr1.ProfileSource != synergy.SourceDeclared || jr2.ProfileSource != synergy.SourceCatalogue {
			t.Errorf("profile sources %s and %s, want declared and catalogue", jr1.ProfileSource, jr2.ProfileSource)
		}
	})
}
