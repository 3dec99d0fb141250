package models_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/models"
)

// TestReservations: a pass's reservations replace the stored ones whole,
// and read back in their order.
func TestReservations(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		first := []models.Reservation{
			{JobID: 9, Seq: 0, GPUs: `["node-0:0","node-0:1"]`, Count: 2, FromS: 1767323045.5, DueS: 1767322000, UpdatedAt: at},
			{JobID: 3, Seq: 1, Count: 4, FromS: 1767323100, DueS: 1767322100, UpdatedAt: at},
		}
		if err := s.SetReservations(ctx, first); err != nil {
			t.Fatal(err)
		}
		got, err := s.Reservations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].JobID != 9 || got[0].GPUs != first[0].GPUs || got[0].FromS != first[0].FromS || got[0].DueS != first[0].DueS ||
			got[1].JobID != 3 || got[1].Count != 4 || got[1].GPUs != "" {
			t.Fatalf("reservations %+v, want %+v", got, first)
		}
		if err := s.SetReservations(ctx, first[1:]); err != nil {
			t.Fatal(err)
		}
		if got, err = s.Reservations(ctx); err != nil || len(got) != 1 || got[0].JobID != 3 {
			t.Fatalf("reservations %+v, %v; want job 3's alone", got, err)
		}
		if err := s.SetReservations(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if got, err = s.Reservations(ctx); err != nil || len(got) != 0 {
			t.Fatalf("reservations %+v, %v; want none", got, err)
		}
	})
}
