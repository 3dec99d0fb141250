package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/models"
)

// demoSharing are the sharing jobs of --demo: models of memest's
// catalogue at a batch size, so that their memory estimate is the
// catalogue's and Salus lanes show on the GPU wall (docs/salus.md).
var demoSharing = []struct {
	model string
	batch int
}{
	{"vgg16", 100}, {"vgg19", 50}, {"resnet50", 64}, {"inception3", 32}, {"vgg11", 100}, {"resnet101", 32},
}

// demoSharingFirst is how many sharing jobs --demo submits at once, so
// that lanes are there when the wall opens.
const demoSharingFirst = 4

// demoSharingJob is the n-th demo sharing job, alice's or bob's.
func demoSharingJob(rng *rand.Rand, n int) (*models.Job, error) {
	w := demoSharing[n%len(demoSharing)]
	est, err := memest.For(memest.Request{Model: w.model, Batch: w.batch})
	if err != nil {
		return nil, fmt.Errorf("demo sharing job %s: %w", w.model, err)
	}
	user, team := "alice", "vision"
	if n%2 == 1 {
		user, team = "bob", "nlp"
	}
	run := 60 + rng.IntN(120)
	return &models.Job{
		Name: fmt.Sprintf("%s-bs%d-shared", w.model, w.batch), Team: team, User: user, GPUs: 1,
		SimDuration: float64(run), TimeLimitS: demoTimeLimit(rng, run), Model: w.model, SubmittedAt: time.Now(),
		Sharing: true, BatchSize: w.batch,
		MemPersistentMiB: est.PersistentMiB, MemEphemeralMiB: est.EphemeralMiB, MemSource: string(est.Source),
	}, nil
}

// submitDemoSharing stores the first demo sharing jobs.
func submitDemoSharing(ctx context.Context, store *models.Store, rng *rand.Rand) error {
	for n := range demoSharingFirst {
		j, err := demoSharingJob(rng, n)
		if err != nil {
			return err
		}
		if err := store.CreateJob(ctx, j); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	return nil
}
