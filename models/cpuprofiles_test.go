package models

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestCPUProfilesAndNotes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, migrated.SQLiteDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The cpu_profiles table comes with its migration step; until that is
	// in place, the test makes it.
	if !s.db.Migrator().HasTable(&CPUProfile{}) {
		if err := s.db.AutoMigrate(&CPUProfile{}); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	row := CPUProfile{Model: "ResNet50", Batch: 256, Family: "measured", CPUCurve: "0:0;3:0.5;6.5:1", MemCurve: "0:0.6;160:1",
		JobID: 7, MeasuredAt: at}
	if err := s.SaveCPUProfile(ctx, row); err != nil {
		t.Fatal(err)
	}
	row.CPUCurve = "0:0;4:1"
	if err := s.SaveCPUProfile(ctx, row); err != nil { // replaces the first
		t.Fatal(err)
	}
	got, err := s.CPUProfiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := row
	want.Model = "resnet50"
	if len(got) != 1 || !got[0].MeasuredAt.Equal(at) {
		t.Fatalf("profiles %+v, want %+v", got, want)
	}
	got[0].MeasuredAt = want.MeasuredAt
	if got[0] != want {
		t.Fatalf("profile %+v, want %+v", got[0], want)
	}

	j := &Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: at, State: JobQueued}
	if err := s.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJobNote(ctx, j.ID, "CPU limits not enforced: "+strings.Repeat("x", 600), at); err != nil {
		t.Fatal(err)
	}
	es, err := s.JobEvents(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := es[len(es)-1]
	if last.State != JobQueued || !strings.HasPrefix(last.Detail, "CPU limits not enforced: xx") || len(last.Detail) > 512 {
		t.Errorf("note %+v", last)
	}
	if err := s.AddJobNote(ctx, 9999, "x", at); err == nil {
		t.Error("a note on a job that does not exist was kept")
	}
}
