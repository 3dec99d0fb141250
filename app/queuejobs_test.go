package app

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// TestQueueJobsByID: a queue's entry converted from the fields the
// store's QueueJobsByID reads is the entry converted from the whole row,
// for jobs of every kind an entry shows differently, as their team and
// as another team sees them.
func TestQueueJobsByID(t *testing.T) {
	ctx := context.Background()
	dsn := modelstest.SQLiteDSN(t)
	store, err := models.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	db, err := gorm.Open(sqlite.Open(strings.TrimPrefix(dsn, "sqlite:")+"?_pragma=busy_timeout(10000)"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if sqlDB, err := db.DB(); err == nil {
		t.Cleanup(func() { sqlDB.Close() })
	}
	now := time.Now().Truncate(time.Second)
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	util := 30.0
	base := func(name string) models.Job {
		return models.Job{Name: name, Team: "vision", User: "alice", GPUs: 2, SimDuration: 600, SimUtilPct: &util,
			State: models.JobQueued, Reason: "submitted", SubmittedAt: now.Add(-time.Hour), ExecutedS: 120, AttainedService: 240,
			Command: models.Strings{"python", "train.py"}, Env: models.Strings{"A=1"}, Model: "resnet50", QueueIndex: 1, QueueSince: 5}
	}
	kinds := map[string]func(j *models.Job){
		"waiting": func(j *models.Job) {},
		"placed by the engine": func(j *models.Job) {
			j.Reason = "stored reason"
		},
		"running": func(j *models.Job) {
			j.State, j.Run, j.Placement, j.LastStartAt, j.StartedAt = models.JobRunning, 2, models.Strings{"m1:0", "m2:1"}, ago(10*time.Minute), ago(20*time.Minute)
			j.RunAccrualS, j.RunGPUSeconds, j.HeldGPUs = 60, 90, 1.5
		},
		"running, its end held": func(j *models.Job) { j.State, j.Run, j.LastStartAt = models.JobRunning, 3, ago(time.Minute) },
		"running on a silent node": func(j *models.Job) {
			j.State, j.Run, j.Placement, j.LastStartAt = models.JobRunning, 1, models.Strings{"quiet:0"}, ago(time.Minute)
		},
		"held":                    func(j *models.Job) { j.HoldReason = "alice's account was disabled" },
		"stalled":                 func(j *models.Job) { j.State, j.RequeueStalls = models.JobPreempted, 99 },
		"waiting for another job": func(j *models.Job) { j.Dependencies, j.Reason = models.Strings{"afterok:1"}, "waits for job 1" },
		"an array's task":         func(j *models.Job) { j.ArrayID, j.ArrayIndex, j.ArrayLimit, j.Reason = 1, 1, 2, "array limit" },
		"a session":               func(j *models.Job) { j.SessionType, j.SessionPort, j.InteractivePriority = "jupyter", 8888, true },
		"high priority":           func(j *models.Job) { j.Priority = "high" },
		"forecast":                func(j *models.Job) {},
	}
	byName := map[string]int64{}
	for name, set := range kinds {
		j := base(name)
		set(&j)
		if err := db.Create(&j).Error; err != nil {
			t.Fatal(err)
		}
		byName[name] = j.ID
	}
	var ids []int64
	for _, id := range byName {
		ids = append(ids, id)
	}
	whole, err := store.JobsByID(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	part, err := store.QueueJobsByID(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) != len(ids) || len(part) != len(ids) {
		t.Fatalf("read %d whole and %d in part, want %d", len(whole), len(part), len(ids))
	}
	var running []models.Job
	for _, j := range whole {
		if j.State == models.JobRunning {
			running = append(running, j)
		}
	}
	m := newMoment(now, running, []models.Team{{Name: "vision", GuaranteeGPUs: 1}}, nil, func(int64) bool { return true })
	m.Waits = map[int64]sched.Wait{byName["placed by the engine"]: {JobID: byName["placed by the engine"], Position: 3, Reason: "waits for 2 GPUs"}}
	m.held = map[int64]engine.HeldExit{byName["running, its end held"]: {Run: 3, Node: "m1", At: now.Add(-time.Second), Since: now}}
	m.silent = map[string]time.Time{"quiet": now.Add(-time.Minute)}
	m.forecasts = map[int64]engine.JobForecast{byName["forecast"]: {State: "estimated", Likely: now.Add(time.Hour), Reason: "after job 7", MadeAt: now}}
	for i := range whole {
		for _, visible := range []bool{true, false} {
			want, got := m.queueJob(&whole[i], visible), m.queueJob(&part[i], visible)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s (visible %v): from QueueJobsByID\n%+v\nfrom the whole row\n%+v", whole[i].Name, visible, got, want)
			}
		}
	}
}
