package enginestore

import (
	"context"
	"fmt"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/core/trace"
	"github.com/gpuportal/gpuportal/models"
)

// SetQueueStates records the queue state the scheduler handed back for
// each job (models.Store.SetQueueStates).
func (s Store) SetQueueStates(ctx context.Context, states map[int64]sched.QueueState) error {
	if len(states) == 0 {
		return nil
	}
	rows := make(map[int64]models.QueueState, len(states))
	for id, q := range states {
		rows[id] = models.QueueState(q)
	}
	return s.Store.SetQueueStates(ctx, rows)
}

// SetHeld records the changes of the GPUs running jobs hold
// (models.Store.SetHeld).
func (s Store) SetHeld(ctx context.Context, changes []engine.Held) error {
	out := make([]models.Held, len(changes))
	for i, c := range changes {
		out[i] = models.Held{Ref: c.Ref, GPUs: c.GPUs, At: c.At}
	}
	return s.Store.SetHeld(ctx, out)
}

// FinishedRunTimes returns up to limit recently finished jobs' run times,
// with who ran what (models.Store.FinishedRunTimes), as forecasts draw
// them.
func (s Store) FinishedRunTimes(ctx context.Context, limit int) ([]forecast.Sample, error) {
	rows, err := s.Store.FinishedRunTimes(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]forecast.Sample, len(rows))
	for i, r := range rows {
		out[i] = forecast.Sample(r)
	}
	return out, nil
}

// SaveCPUProfile keeps a measured profile of a model at a batch size,
// its curves written as the traces write them (trace.FormatCurve).
func (s Store) SaveCPUProfile(ctx context.Context, lp synergy.LearnedProfile) error {
	return s.Store.SaveCPUProfile(ctx, models.CPUProfile{Model: lp.Model, Batch: lp.Batch, Family: lp.Profile.Family,
		CPUCurve: formatCurve(lp.Profile.CPU), MemCurve: formatCurve(lp.Profile.Mem), JobID: lp.JobID, MeasuredAt: lp.At})
}

// CPUProfiles returns every measured profile.
func (s Store) CPUProfiles(ctx context.Context) ([]synergy.LearnedProfile, error) {
	rs, err := s.Store.CPUProfiles(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]synergy.LearnedProfile, 0, len(rs))
	for _, r := range rs {
		cpu, err := parseCurve(r.CPUCurve)
		if err != nil {
			return nil, fmt.Errorf("CPU profile of %s at batch %d: cpu curve: %w", r.Model, r.Batch, err)
		}
		mem, err := parseCurve(r.MemCurve)
		if err != nil {
			return nil, fmt.Errorf("CPU profile of %s at batch %d: memory curve: %w", r.Model, r.Batch, err)
		}
		out = append(out, synergy.LearnedProfile{Model: r.Model, Batch: r.Batch, JobID: r.JobID, At: r.MeasuredAt,
			Profile: synergy.Profile{Family: r.Family, CPU: cpu, Mem: mem}})
	}
	return out, nil
}

func formatCurve(c synergy.Curve) string {
	pts := make([]trace.CurvePoint, len(c))
	for i, p := range c {
		pts[i] = trace.CurvePoint{X: p.X, Speed: p.Speed}
	}
	return trace.FormatCurve(pts)
}

func parseCurve(s string) (synergy.Curve, error) {
	pts, err := trace.ParseCurve(s)
	if err != nil {
		return nil, err
	}
	c := make(synergy.Curve, len(pts))
	for i, p := range pts {
		c[i] = synergy.Point{X: p.X, Speed: p.Speed}
	}
	return c, nil
}
