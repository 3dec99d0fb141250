package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// BenchmarkTransitionNotified measures what queuing notifications adds to
// a job's start and preemption (two events, each its transaction): for
// an owner without settings (one lookup), and for one told of both by
// email and webhook (the lookup and four outbox rows).
func BenchmarkTransitionNotified(b *testing.B) {
	for _, c := range []struct {
		name string
		set  *models.NotificationSettings
	}{
		{"no settings", nil},
		{"email and webhook", &models.NotificationSettings{Email: "a@example.org", WebhookURL: "https://example.org/h",
			Events: models.Strings{models.EventStarted, models.EventPreempted}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := models.Open(ctx, modelstest.SQLiteDSN(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, err := s.CreateTeam(ctx, "vision", 4); err != nil {
				b.Fatal(err)
			}
			u, err := s.CreateUser(ctx, "alice", "password1", models.RoleResearcher, "vision")
			if err != nil {
				b.Fatal(err)
			}
			if c.set != nil {
				c.set.UserID = u.ID
				if err := s.SetNotificationSettings(ctx, c.set, t0); err != nil {
					b.Fatal(err)
				}
			}
			j := &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: t0}
			if err := s.CreateJob(ctx, j); err != nil {
				b.Fatal(err)
			}
			now := t0
			b.ResetTimer()
			for b.Loop() {
				now = now.Add(time.Second)
				run, err := s.MarkStarted(ctx, j.ID, []string{"n1:0"}, now)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.MarkStopped(ctx, job.RunRef{Job: j.ID, Run: run}, models.JobPreempted, nil, "reclaimed", usage.Service{}, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
