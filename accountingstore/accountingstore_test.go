package accountingstore_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/accountingstore"
	"github.com/gpuportal/gpuportal/core/accounting"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestAccountingAddsUp records runs with known times through the store
// and GPU history with known utilization, and checks on both databases
// that allocated GPU-hours equal the runs' durations x GPUs (a shared GPU
// by its fraction), that used follows the samples, that users add up to
// teams and teams to the cluster, and that once the days are closed the
// GPU time used survives the GPU history being pruned.
func TestAccountingAddsUp(t *testing.T) {
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		d0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		at := func(h float64) time.Time { return d0.Add(time.Duration(h * float64(time.Hour))) }
		type runSpec struct {
			gpus       []string
			start, end float64 // hours; end 0: still running
			state      models.JobState
		}
		jobs := []struct {
			team, user string
			gpus       int
			fraction   float64
			runs       []runSpec
		}{
			{"nlp", "alice", 2, 0, []runSpec{{[]string{"n1:0", "n1:1"}, 1, 3, models.JobSucceeded}}},
			{"nlp", "carol", 1, 0, []runSpec{{[]string{"n1:2"}, 22, 26, models.JobPreempted}, {[]string{"n1:2"}, 27, 0, ""}}},
			{"vision", "bob", 1, 0.5, []runSpec{{[]string{"n2:0"}, 1, 5, models.JobFailed}}},
			{"vision", "dan", 1, 0.5, []runSpec{{[]string{"n2:0"}, 2, 4, models.JobSucceeded}}},
		}
		now := at(49)
		wantAlloc := 0.0
		for _, js := range jobs {
			j := &models.Job{Name: "acct", Team: js.team, User: js.user, GPUs: js.gpus, GPUFraction: js.fraction,
				Sharing: js.fraction > 0, SubmittedAt: at(js.runs[0].start - 0.5)}
			if err := s.CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			for _, r := range js.runs {
				run, err := s.MarkStarted(ctx, j.ID, r.gpus, at(r.start))
				if err != nil {
					t.Fatal(err)
				}
				end := r.end
				if end == 0 {
					end = 49
				} else if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: run}, r.state, nil, "", usage.Service{}, at(r.end)); err != nil {
					t.Fatal(err)
				}
				share := 1.0
				if js.fraction > 0 {
					share = js.fraction
				}
				wantAlloc += (end - r.start) * float64(js.gpus) * share
			}
		}
		var hist []models.GPUHistory
		for m := 60; m < 180; m++ { // minutes of hours 1 and 2
			start := d0.Unix() + int64(m)*60
			hist = append(hist,
				models.GPUHistory{Step: models.StepMinute, Start: start, GPU: "u-n1-0", Node: "n1", GPUIndex: 0, Samples: 60, UtilAvgPct: 90},
				models.GPUHistory{Step: models.StepMinute, Start: start, GPU: "u-n1-1", Node: "n1", GPUIndex: 1, Samples: 60, UtilAvgPct: 2})
		}
		for h := 0; h < 6; h++ {
			hist = append(hist, models.GPUHistory{Step: models.StepHour, Start: d0.Unix() + int64(h)*3600, GPU: "u-n2-0", Node: "n2", GPUIndex: 0, Samples: 3600, UtilAvgPct: 50})
		}
		if err := s.SaveGPUHistory(ctx, hist); err != nil {
			t.Fatal(err)
		}
		from, to := d0, d0.AddDate(0, 0, 3)
		check := func(stage string) {
			t.Helper()
			a, err := accountingstore.Read(ctx, s, from, to, now, 0.05)
			if err != nil {
				t.Fatal(err)
			}
			build := func(by accounting.By) accounting.Report {
				return accounting.Build(a.Days, a.Jobs, a.Runs, accounting.Options{From: from, To: to, By: by, Period: accounting.PerDay})
			}
			users, teams := build(accounting.ByUser), build(accounting.ByTeam)
			gh := func(s float64) float64 { return s / 3600 }
			near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
			if !near(gh(teams.Total.Allocated), wantAlloc) || !near(gh(users.Total.Allocated), wantAlloc) {
				t.Errorf("%s: allocated %.4f GPU-hours by team, %.4f by user; the runs hold %.4f", stage, gh(teams.Total.Allocated), gh(users.Total.Allocated), wantAlloc)
			}
			// alice 2 h at 90% and 2 h at 2%; bob 4 h of half a GPU at
			// 50%; dan 2 h of half a GPU at 50%; carol has no samples.
			if want := 1.8 + 0.04 + 1 + 0.5; !near(gh(teams.Total.Used), want) {
				t.Errorf("%s: used %.4f GPU-hours, want %.4f", stage, gh(teams.Total.Used), want)
			}
			if !near(gh(teams.Total.IdleAllocated), 2) {
				t.Errorf("%s: allocated while idle %.4f GPU-hours, want 2 (alice's second GPU)", stage, gh(teams.Total.IdleAllocated))
			}
			for _, tr := range teams.Rows {
				var sum accounting.Usage
				for _, ur := range users.Rows {
					if ur.Team == tr.Team && ur.Period.Equal(tr.Period) {
						sum = sum.Add(ur.Usage)
					}
				}
				if !near(sum.Allocated, tr.Allocated) || !near(sum.Used, tr.Used) || !near(sum.IdleAllocated, tr.IdleAllocated) {
					t.Errorf("%s: %s on %s: users sum to %+v, the team has %+v", stage, tr.Team, tr.Period.Format(time.DateOnly), sum, tr.Usage)
				}
			}
			for _, p := range teams.Periods {
				var sum accounting.Usage
				for _, tr := range teams.Rows {
					if tr.Period.Equal(p.Period) {
						sum = sum.Add(tr.Usage)
					}
				}
				if !near(sum.Allocated, p.Allocated) || !near(sum.Used, p.Used) {
					t.Errorf("%s: teams on %s sum to %+v, the cluster has %+v", stage, p.Period.Format(time.DateOnly), sum, p.Usage)
				}
			}
			if o := teams.Total.Outcomes; o["succeeded"] != 2 || o["failed"] != 1 || teams.Total.Preempted != 1 {
				t.Errorf("%s: outcomes %v, %d preempted", stage, o, teams.Total.Preempted)
			}
		}
		check("from GPU history")
		n, err := accountingstore.CloseDays(ctx, s, now, 0.05, 31)
		if err != nil || n != 2 {
			t.Fatalf("closed %d days, err %v; want 2 (the third is today)", n, err)
		}
		if n, err := accountingstore.CloseDays(ctx, s, now, 0.05, 31); err != nil || n != 0 {
			t.Fatalf("closed %d days again, err %v; want none", n, err)
		}
		if _, err := s.PruneHistory(ctx, now.Unix()); err != nil {
			t.Fatal(err)
		}
		check("from closed days after the GPU history is pruned")
	})
}

// TestAccountingReclaimed: RecordReclaim marks the running run (not an
// ended one) and accounting reads what it gave back, on both databases.
func TestAccountingReclaimed(t *testing.T) {
	modelstest.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		d0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		at := func(h float64) time.Time { return d0.Add(time.Duration(h * float64(time.Hour))) }
		j := &models.Job{Name: "idle", Team: "nlp", User: "alice", GPUs: 2, SubmittedAt: at(1)}
		if err := s.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
		run, err := s.MarkStarted(ctx, j.ID, []string{"n1:0", "n1:1"}, at(1))
		if err != nil {
			t.Fatal(err)
		}
		ref := job.RunRef{Job: j.ID, Run: run}
		if err := s.RecordReclaim(ctx, ref, -1, at(2)); err == nil {
			t.Error("RecordReclaim took -1 GPU-seconds")
		}
		if err := s.RecordReclaim(ctx, ref, 1234.5, at(2)); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkStopped(ctx, ref, models.JobPreempted, nil, "reclaimed: idle since 01:30", usage.Service{}, at(2.01)); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordReclaim(ctx, ref, 1, at(3)); !errors.Is(err, models.ErrConflict) {
			t.Errorf("RecordReclaim of an ended run: %v, want ErrConflict", err)
		}
		a, err := accountingstore.Read(ctx, s, d0, d0.AddDate(0, 0, 1), at(4), 0.05)
		if err != nil {
			t.Fatal(err)
		}
		rep := accounting.Build(a.Days, a.Jobs, a.Runs, accounting.Options{From: d0, To: d0.AddDate(0, 0, 1), By: accounting.ByUser, Period: accounting.PerDay})
		if len(rep.Rows) != 1 || rep.Rows[0].ReclaimedGPUSeconds != 1234.5 || rep.Rows[0].User != "alice" {
			t.Errorf("rows %+v, want alice's with 1234.5 reclaimed GPU-s", rep.Rows)
		}
	})
}

func openStore(t *testing.T, dsn string) *models.Store {
	t.Helper()
	s, err := models.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", models.RedactDSN(dsn), err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
