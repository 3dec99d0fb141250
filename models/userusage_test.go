package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models"
)

func TestUserUsage(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		first := map[models.TeamUser]float64{{Team: "vision", User: "alice"}: 100, {Team: "vision", User: "bob"}: 5}
		if err := s.SetUserUsage(ctx, first, at); err != nil {
			t.Fatal(err)
		}
		// A second save updates in place.
		if err := s.SetUserUsage(ctx, map[models.TeamUser]float64{{Team: "vision", User: "alice"}: 250}, at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		got, err := s.UserUsages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].User != "alice" || got[0].UsageGPUSeconds != 250 || !got[0].UsageAt.Equal(at.Add(time.Minute)) ||
			got[1].User != "bob" || got[1].UsageGPUSeconds != 5 {
			t.Errorf("user usage %+v", got)
		}
	})
}
