package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/models"
)

// demoPassword is the password of every demo user. Development mode is
// loopback-only because of it.
const demoPassword = "dev"

var demoUsers = []struct {
	name string
	role models.Role
	team string
}{
	{"admin", models.RoleAdmin, ""},
	{"lead", models.RoleLead, "vision"},
	{"alice", models.RoleResearcher, "vision"},
	{"bob", models.RoleResearcher, "nlp"},
}

// seedDemo creates the demo teams and users where they do not exist yet.
func seedDemo(ctx context.Context, store *models.Store, stdout io.Writer) error {
	for _, t := range []string{"vision", "nlp"} {
		if _, err := store.EnsureTeam(ctx, t, 4); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "demo users (password %q):", demoPassword)
	for _, u := range demoUsers {
		_, err := store.UserByName(ctx, u.name)
		if errors.Is(err, models.ErrNotFound) {
			_, err = store.CreateUser(ctx, u.name, demoPassword, u.role, u.team)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, " %s (%s)", u.name, u.role)
	}
	fmt.Fprintln(stdout)
	return nil
}

// demoModels are the workloads the demo submits: a model of the
// scheduler's catalogue and its GPU memory in GB.
var demoModels = []struct {
	name  string
	memGB float64
}{
	{"resnet50", 22}, {"vgg16", 14}, {"bert", 18}, {"gpt2", 38},
	{"inception3", 12}, {"transformer", 30}, {"resnet152", 34}, {"bert-large", 62},
}

// maxDemoBacklog bounds the unfinished demo jobs, so that a long-running
// demo keeps a queue without growing it forever.
const maxDemoBacklog = 14

// runDemo submits a simulated job from alice or bob every few seconds.
func runDemo(ctx context.Context, store *models.Store, eng *engine.Engine, log *slog.Logger) {
	rng := rand.New(rand.NewPCG(1, 2))
	gpuChoices := []int{1, 1, 1, 2, 2, 4, 4, 8}
	if err := submitDemoIdle(ctx, store); err != nil {
		log.Warn("demo: idle job", "err", err)
	}
	if err := submitDemoSharing(ctx, store, rng); err != nil {
		log.Warn("demo: sharing jobs", "err", err)
	}
	eng.Wake()
	shared := demoSharingFirst
	for {
		wait := time.Duration(2000+rng.IntN(4000)) * time.Millisecond
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		unfinished, err := store.ListJobs(ctx, models.JobFilter{States: models.UnfinishedStates, Limit: maxDemoBacklog})
		if err != nil {
			log.Warn("demo: list jobs", "err", err)
			continue
		}
		if len(unfinished) >= maxDemoBacklog {
			continue
		}
		if rng.IntN(3) == 0 { // a third of the jobs share a GPU
			j, err := demoSharingJob(rng, shared)
			shared++
			if err == nil {
				err = store.CreateJob(ctx, j)
			}
			if err != nil {
				log.Warn("demo: submit", "err", err)
			}
			eng.Wake()
			continue
		}
		m := demoModels[rng.IntN(len(demoModels))]
		user, team := "alice", "vision"
		if rng.IntN(2) == 1 {
			user, team = "bob", "nlp"
		}
		run := 20 + rng.IntN(160)
		j := &models.Job{
			Name: fmt.Sprintf("%s-bs%d", m.name, 16<<rng.IntN(4)), Team: team, User: user,
			GPUs:        gpuChoices[rng.IntN(len(gpuChoices))],
			SimDuration: float64(run),
			TimeLimitS:  demoTimeLimit(rng, run),
			GPUMemMiB:   int64(m.memGB * 1024),
			Model:       m.name,
			SubmittedAt: time.Now(),
		}
		if err := store.CreateJob(ctx, j); err != nil {
			log.Warn("demo: submit", "err", err)
			continue
		}
		eng.Wake()
	}
}

// demoTimeLimit is the time limit a demo user declares for a job that
// runs runS seconds: as users of a batch system do, more than they
// expect (1.5 to 3 times the run time), rounded up to whole minutes. It
// is what lets the demo's forecasts and backfill use limits, as a lab's
// would; scripts/demo-trace draws the same.
func demoTimeLimit(rng *rand.Rand, runS int) int64 {
	s := float64(runS) * (1.5 + 1.5*rng.Float64())
	return int64(math.Ceil(s/60)) * 60
}

// demoIdleUtilPct is the utilization of the demo's idle notebook: a
// Jupyter kernel that holds a GPU and a model in memory and computes now
// and then.
const demoIdleUtilPct = 1

// submitDemoIdle submits alice's notebook, which holds a GPU for half an
// hour and barely uses it: the demo's idle-GPU flag (--idle-after). Its
// limit is an hour, as a lab's notebooks have wall times: with every job
// limited, the first waits are forecast from the limits before any job
// has finished (forecast.limitRemaining). Team
// vision reclaims idle batch jobs, so its page also shows the reclaim
// warning and the keep-alive button (--idle-reclaim-grace).
func submitDemoIdle(ctx context.Context, store *models.Store) error {
	if err := store.SetTeamIdlePolicy(ctx, "vision", models.IdlePolicy{ReclaimBatch: true}); err != nil {
		return fmt.Errorf("demo: vision's idle policy: %w", err)
	}
	util := float64(demoIdleUtilPct)
	j := &models.Job{Name: "notebook-alice", Team: "vision", User: "alice", GPUs: 1, SimDuration: 1800,
		TimeLimitS: 3600, SimUtilPct: &util, GPUMemMiB: 6 * 1024, SubmittedAt: time.Now()}
	return store.CreateJob(ctx, j)
}
