package enginestore

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestForecastsRecordedAgainstStarts: forecasts are kept once per job and
// kind, and each is set against the first start after it, a start after
// a preemption included; run times come from every job that ran and
// finished, with who ran what.
func TestForecastsRecordedAgainstStarts(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		at := func(sec int) *time.Time { v := t0.Add(time.Duration(sec) * time.Second); return &v }
		a := &models.Job{Name: "a", Team: "vision", User: "alice", GPUs: 1, Model: "resnet50", SubmittedAt: t0}
		b := &models.Job{Name: "b", Team: "nlp", User: "bob", GPUs: 8, SubmittedAt: t0}
		for _, j := range []*models.Job{a, b} {
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		rec := []engine.ForecastRecord{
			{JobID: a.ID, Kind: "first", MadeAt: *at(1), State: forecast.StateExpected, Earliest: at(5), Likely: at(10), Latest: at(20)},
			{JobID: b.ID, Kind: "first", MadeAt: *at(1), State: forecast.StateNever, Reason: "cannot start"},
		}
		if err := s.RecordForecasts(ctx, rec); err != nil {
			t.Fatal(err)
		}
		// A second first forecast of a is dropped.
		if err := s.RecordForecasts(ctx, []engine.ForecastRecord{{JobID: a.ID, Kind: "first", MadeAt: *at(2), State: forecast.StateExpected, Earliest: at(100), Likely: at(100)}}); err != nil {
			t.Fatal(err)
		}
		run, err := s.MarkStarted(ctx, a.ID, []gpu.Ref{{Node: "n", Index: 0}}, *at(12))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.MarkStopped(ctx, job.RunRef{Job: a.ID, Run: run}, models.JobPreempted, nil, "preempted", usage.Service{}, *at(30)); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordForecasts(ctx, []engine.ForecastRecord{{JobID: a.ID, Kind: "1m", MadeAt: *at(60), State: forecast.StateLater, Earliest: at(70)}}); err != nil {
			t.Fatal(err)
		}
		run, err = s.MarkStarted(ctx, a.ID, []gpu.Ref{{Node: "n", Index: 0}}, *at(90))
		if err != nil {
			t.Fatal(err)
		}
		code := 0
		if err := s.MarkStopped(ctx, job.RunRef{Job: a.ID, Run: run}, models.JobSucceeded, &code, "", usage.Service{}, *at(100)); err != nil {
			t.Fatal(err)
		}
		rows, err := s.ForecastOutcomes(ctx, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		outs := make([]forecast.Outcome, len(rows))
		for i, o := range rows {
			outs[i] = forecast.Outcome{State: forecast.State(o.State), Earliest: o.Earliest, Likely: o.Likely, Latest: o.Latest,
				MadeAt: o.MadeAt, Start: o.Start}
		}
		if len(outs) != 2 {
			t.Fatalf("outcomes %+v: want a's two (b never started)", outs)
		}
		// Newest first: the 1m one, against the second start; the first
		// one, against the first start.
		if outs[0].State != forecast.StateLater || outs[0].Start-outs[0].MadeAt != 30 || !outs[0].Within(0) {
			t.Errorf("1m outcome %+v: want later, started 30 s after, within", outs[0])
		}
		if outs[1].Start-outs[1].MadeAt != 11 || outs[1].Likely-outs[1].MadeAt != 9 || !outs[1].Within(0) {
			t.Errorf("first outcome %+v: want the first forecast, started 11 s after, within", outs[1])
		}
		if first, err := s.ForecastOutcomes(ctx, "first", 100); err != nil || len(first) != 1 {
			t.Errorf("first outcomes %+v, %v; want one", first, err)
		}
		samples, err := s.FinishedRunTimes(ctx, 10)
		if err != nil || len(samples) != 1 || samples[0] != (forecast.Sample{User: "alice", Team: "vision", Model: "resnet50", RunS: 28, GPUs: 1}) {
			t.Errorf("run times %+v, %v; want alice's 28 s on 1 GPU", samples, err)
		}
		recent, err := s.RecentSubmissions(ctx, t0.Add(-time.Minute), 10)
		if err != nil || len(recent) != 2 || recent[0].ID != b.ID || recent[0].GPUs != 8 {
			t.Errorf("recent submissions %+v, %v; want b then a", recent, err)
		}
	})
}

// TestLatestForecasts: a job's latest forecast replaces the one stored
// before, only waiting jobs' are read back, and none is measured against
// starts.
func TestLatestForecasts(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		at := func(sec int) *time.Time { v := t0.Add(time.Duration(sec) * time.Second); return &v }
		a := &models.Job{Name: "a", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: t0}
		b := &models.Job{Name: "b", Team: "nlp", User: "bob", GPUs: 1, SubmittedAt: t0}
		for _, j := range []*models.Job{a, b} {
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		for _, rs := range [][]engine.ForecastRecord{
			{{JobID: a.ID, MadeAt: *at(1), State: forecast.StateExpected, Earliest: at(5), Likely: at(10), Latest: at(20)},
				{JobID: b.ID, MadeAt: *at(1), State: forecast.StateExpected, Likely: at(3)}},
			{{JobID: a.ID, MadeAt: *at(6), State: forecast.StateLater, Earliest: at(30), Reason: "behind b"}},
		} {
			if err := s.SetLatestForecasts(ctx, rs); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.MarkStarted(ctx, b.ID, []gpu.Ref{{Node: "n", Index: 0}}, *at(8)); err != nil {
			t.Fatal(err)
		}
		got, err := s.LatestForecasts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fa, ok := got[a.ID]
		if len(got) != 1 || !ok || fa.State != string(forecast.StateLater) || !fa.MadeAt.Equal(*at(6)) ||
			fa.Earliest == nil || !fa.Earliest.Equal(*at(30)) || fa.Likely != nil || fa.Reason != "behind b" {
			t.Errorf("latest forecasts %+v: want a's second only (b runs)", got)
		}
		if outs, err := s.ForecastOutcomes(ctx, "", 100); err != nil || len(outs) != 0 {
			t.Errorf("outcomes %+v, %v: want none (latest forecasts are not measured)", outs, err)
		}
	})
}
