package web

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// The conversions from the store's and the engine's values to the api
// types live in package app (app.Moment): a request or a published
// update reads one moment and converts everything it shows from it.

// moment is an app.Moment with the names web's pages read it by.
type moment struct {
	*app.Moment
	now     time.Time
	running []models.Job
	queued  []models.QueueRow
	teams   []models.Team
	figures usage.Figures
}

// momentOf is m as web reads it; nil for nil.
func momentOf(m *app.Moment, err error) (*moment, error) {
	if err != nil {
		return nil, err
	}
	return &moment{Moment: m, now: m.Now, running: m.Running, queued: m.Queued, teams: m.Teams, figures: m.Figures}, nil
}

// moment reads the store and the engine once (app.App.Moment).
func (s *Server) moment(ctx context.Context) (*moment, error) {
	return momentOf(s.app.Moment(ctx))
}

// shownMoment is a moment to convert js with, and only them
// (app.App.ShownMoment).
func (s *Server) shownMoment(ctx context.Context, js ...models.Job) (*moment, error) {
	return momentOf(s.app.ShownMoment(ctx, js...))
}

// runningMoment is a moment of the running jobs alone
// (app.App.RunningMoment).
func (s *Server) runningMoment(ctx context.Context) (*moment, error) {
	return momentOf(s.app.RunningMoment(ctx))
}

func (m *moment) job(j *models.Job) api.Job                         { return m.Job(j) }
func (m *moment) queueJob(j *models.Job, visible bool) api.QueueJob { return m.QueueJob(j, visible) }
func (m *moment) teamShare(t models.Team) api.TeamShare             { return m.TeamShare(t) }
func (m *moment) teamShares() []api.TeamShare                       { return m.TeamShares() }

// idlePolicyOf is t's idle policy as the API gives it (app.IdlePolicyOf).
func idlePolicyOf(t *models.Team) api.IdlePolicy { return app.IdlePolicyOf(t) }

// jobOf is j as the API and the job:<id> topic show it
// (app.App.JobOf), with, while it runs sharing a GPU, its lane.
func (s *Server) jobOf(m *moment, j *models.Job) api.Job {
	out := s.app.JobOf(m.Moment, j)
	if j.Sharing && j.State == job.Running {
		out.Lane = s.jobLane(j.ID)
	}
	return out
}

// pointOf converts a GPU reading.
func pointOf(p telemetry.Point) api.Point {
	out := api.Point{T: p.T, MemUsedMiB: p.MemUsedMiB, MemMiB: p.MemMiB, MemReservedMiB: p.MemReservedMiB, UtilPct: p.UtilPct,
		Jobs: make([]api.PointJob, len(p.Jobs)), Held: append([]int64{}, p.Held...), PowerW: p.PowerW, TempC: p.TempC}
	for i, j := range p.Jobs {
		out.Jobs[i] = api.PointJob{JobID: j.JobID, MemMiB: j.MemMiB}
	}
	return out
}

// pointsOf converts GPU readings; never nil.
func pointsOf(ps []telemetry.Point) []api.Point {
	out := make([]api.Point, len(ps))
	for i, p := range ps {
		out[i] = pointOf(p)
	}
	return out
}

// jobMemoryOf converts a job's memory readings; never nil.
func jobMemoryOf(ps []telemetry.JobPoint) []api.JobMemory {
	out := make([]api.JobMemory, len(ps))
	for i, p := range ps {
		out[i] = api.JobMemory{T: p.T, Node: p.GPU.Node, GPU: p.GPU.Index, MemMiB: p.MemMiB}
	}
	return out
}

// fmtGPUs writes a number of GPUs as a person reads it, to the hundredth
// (as static/history.js does): 3, 2.5, 0.33.
func fmtGPUs(n float64) string {
	r := math.Round(n*100) / 100
	if r == 0 {
		r = 0 // not -0
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}
