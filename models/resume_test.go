package models

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

func TestLostWork(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Date(2026, 11, 28, 12, 0, s, 0, time.UTC) }
	ended := func(s int) *time.Time { t := at(s); return &t }
	runs := []Run{{Run: 1, StartedAt: at(0), EndedAt: ended(10)}, {Run: 2, StartedAt: at(12), EndedAt: ended(20)}}
	tests := []struct {
		name   string
		before []Run
		resume job.Resume
		want   time.Duration
	}{
		{"from scratch: every run is redone", runs, job.Resume{Run: 3}, 18 * time.Second},
		{"from the last run's checkpoint", runs[1:], job.Resume{Run: 3, FromRun: 2, CheckpointAt: at(17)}, 3 * time.Second},
		{"the last run wrote none: all of it", runs[1:], job.Resume{Run: 3, FromRun: 1, CheckpointAt: at(8)}, 8 * time.Second},
		{"both runs after the checkpoint", runs, job.Resume{Run: 3, FromRun: 1, CheckpointAt: at(8)}, 10 * time.Second},
		{"a checkpoint written as the run stopped", runs[1:], job.Resume{Run: 3, CheckpointAt: at(20)}, 0},
		{"a run still open counts nothing", []Run{{Run: 1, StartedAt: at(0)}}, job.Resume{Run: 2}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := LostWork(tc.before, tc.resume); got != tc.want {
				t.Errorf("lost %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRecordResume: each run's resume is recorded once, with the work the
// stop before it cost, summed over the job, and a line of its history.
func TestRecordResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, migrated.SQLiteDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := func(sec int) time.Time { return time.Date(2026, 11, 28, 12, 0, sec, 0, time.UTC) }
	ended := func(sec int) *time.Time { t := at(sec); return &t }
	j := &Job{Name: "ckpt", Team: "vision", User: "alice", GPUs: 1, Command: Strings{"train"}, SubmittedAt: at(0), State: JobRunning, Run: 3}
	if err := s.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Run{{JobID: j.ID, Run: 1, StartedAt: at(0), EndedAt: ended(10)}, {JobID: j.ID, Run: 2, StartedAt: at(12), EndedAt: ended(20)},
		{JobID: j.ID, Run: 3, StartedAt: at(22)}} {
		if err := s.db.Create(&r).Error; err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		resume       job.Resume
		lost, total  float64
		from, latest int64
	}{
		// Run 2's start was never recorded (its machine did not say):
		// run 3's counts both runs before it, run 1 nothing (it ended
		// before the checkpoint), run 2 its last 3 s.
		{job.Resume{Run: 3, FromRun: 2, CheckpointAt: at(17)}, 3, 3, 2, 3},
		{job.Resume{Run: 3, FromRun: 2, CheckpointAt: at(17)}, 3, 3, 2, 3}, // again: nothing changes
		{job.Resume{Run: 2, CheckpointAt: at(8)}, 3, 3, 2, 3},              // an earlier run: nothing changes
	}
	for i, st := range steps {
		if err := s.RecordResume(ctx, j.ID, st.resume, at(23)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ResumeRun != st.latest || got.ResumeFromRun != st.from || got.ResumeLostS != st.lost || got.LostS != st.total ||
			got.ResumeCheckpointAt == nil || !got.ResumeCheckpointAt.Equal(at(17)) {
			t.Errorf("step %d: resume run %d from %d at %v, lost %v of %v; want run %d from %d at %v, lost %v of %v", i,
				got.ResumeRun, got.ResumeFromRun, got.ResumeCheckpointAt, got.ResumeLostS, got.LostS, st.latest, st.from, at(17), st.lost, st.total)
		}
	}
	// Run 4 resumes from run 3's checkpoint: run 3, recorded while it
	// ran, loses its last 2 s.
	if err := s.db.Model(&Run{}).Where("job_id = ? AND run = 3", j.ID).Update("ended_at", at(30)).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.db.Create(&Run{JobID: j.ID, Run: 4, StartedAt: at(31), EndedAt: ended(40)}).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.db.Model(&Job{}).Where("id = ?", j.ID).Update("run", 4).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.RecordResume(ctx, j.ID, job.Resume{Run: 4, FromRun: 3, CheckpointAt: at(28)}, at(32)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Job(ctx, j.ID); err != nil || got.ResumeLostS != 2 || got.LostS != 5 {
		t.Fatalf("run 4 from run 3's checkpoint: %+v, %v; want 2 s lost, 5 s in all", got, err)
	}
	// Run 5 lands on a machine without the checkpoint: everything the
	// runs before it did is lost, less the 3 s lost already.
	if err := s.db.Create(&Run{JobID: j.ID, Run: 5, StartedAt: at(41)}).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.db.Model(&Job{}).Where("id = ?", j.ID).Update("run", 5).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.RecordResume(ctx, j.ID, job.Resume{Run: 5}, at(42)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Job(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ResumeRun != 5 || got.ResumeFromRun != 0 || got.ResumeCheckpointAt != nil || got.ResumeLostS != 30 || got.LostS != 35 {
		t.Errorf("from scratch: run %d from %d at %v, lost %v of %v; want run 5 from 0 at nil, lost 30 of 35 (10+8+8+9 run)",
			got.ResumeRun, got.ResumeFromRun, got.ResumeCheckpointAt, got.ResumeLostS, got.LostS)
	}
	es, err := s.JobEvents(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	notes := 0
	for _, e := range es {
		if strings.HasPrefix(e.Detail, "run 3 resumed from the checkpoint run 2 wrote at 12:00:17 UTC; the work lost to the stop before it: 3s") {
			notes++
		}
	}
	if !strings.Contains(es[len(es)-1].Detail, "run 5 started from scratch") {
		t.Errorf("the last line of history is %q, want run 5's start from scratch", es[len(es)-1].Detail)
	}
	if notes != 1 {
		t.Errorf("history %+v: want one line of run 3's resume", es)
	}
}
