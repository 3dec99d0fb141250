package history

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// newStore opens a store on a fresh SQLite database.
func newStore(t *testing.T) *models.Store {
	t.Helper()
	store, err := models.OpenWith(context.Background(), modelstest.SQLiteDSN(t), models.Options{PasswordCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func TestRollupAndPrune(t *testing.T) {
	store := newStore(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	now := time.Unix(100*86400, 0)
	day := int64(86400)
	rows := []models.GPUHistory{
		{Step: models.StepMinute, Start: now.Unix() - 100*day, GPU: "G", Samples: 60}, // past keep: pruned
		{Step: models.StepMinute, Start: now.Unix() - 8*day, GPU: "G", Samples: 60},   // past raw: rolled up
		{Step: models.StepMinute, Start: now.Unix() - 8*day + 60, GPU: "G", Samples: 60},
		{Step: models.StepMinute, Start: now.Unix() - day, GPU: "G", Samples: 60}, // kept as is
	}
	if err := store.SaveGPUHistory(ctx, rows); err != nil {
		t.Fatal(err)
	}
	w := New(Config{Store: store, Logger: quiet, Raw: 7 * 24 * time.Hour, Keep: 90 * 24 * time.Hour})
	if err := w.Maintain(ctx, now); err != nil {
		t.Fatal(err)
	}
	got, _ := store.GPUHistoryRange(ctx, "", 0, 1<<40)
	var steps []int
	for _, r := range got {
		steps = append(steps, r.Step)
	}
	if len(got) != 2 || !reflect.DeepEqual(steps, []int{models.StepHour, models.StepMinute}) || got[0].Samples != 120 {
		t.Errorf("after roll-up and pruning: %+v", got)
	}
}

// TestClosedMinutes: each minute after the last counted gets its row of
// job counts once, in order.
func TestClosedMinutes(t *testing.T) {
	as := []telemetry.Aggregate{{Start: 180}, {Start: 120}, {Start: 180}, {Start: 60}, {Start: 240}}
	if got, want := closedMinutes(as, 60), []int64{120, 180, 240}; !reflect.DeepEqual(got, want) {
		t.Errorf("closedMinutes after 60 = %v, want %v", got, want)
	}
}

// TestNewDefaults: history is kept at least as long as its minutes, and
// the defaults fill what the config leaves out.
func TestNewDefaults(t *testing.T) {
	w := New(Config{Raw: 30 * 24 * time.Hour, Keep: 24 * time.Hour})
	if w.cfg.Keep != w.cfg.Raw || w.cfg.Every != 10*time.Minute || w.cfg.IdleBelowPct != 5 {
		t.Errorf("config %+v: want Keep raised to Raw, Every 10m, idle below 5%%", w.cfg)
	}
}
