package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// wholeRows is the store with a queue's page read whole, by gorm
// (JobsByID), as every queue's page was before QueueJobsByID: what its
// answers are compared with.
type wholeRows struct{ *models.Store }

func (w wholeRows) QueueJobsByID(ctx context.Context, ids []int64) ([]models.Job, error) {
	return w.JobsByID(ctx, ids)
}

// TestQueueJobsByID: a queue's entry converted from the fields the
// store's QueueJobsByID reads is the entry converted from the whole row,
// for jobs of every kind an entry shows differently, as their team and
// as another team sees them; and the queues' answer (GET /api/v1/queues)
// is the same JSON, byte for byte, as from the whole rows. On SQLite
// and PostgreSQL.
func TestQueueJobsByID(t *testing.T) {
	modelstest.ForEachDB(t, testQueueJobsByID)
}

func testQueueJobsByID(t *testing.T, dsn string) {
	ctx := context.Background()
	store, err := models.OpenWith(ctx, dsn, models.Options{PasswordCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	db := modelstest.Gorm(t, dsn)
	now := time.Now().Truncate(time.Second)
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	util := 30.0
	base := func(name string) models.Job {
		return models.Job{Name: name, Team: "vision", User: "alice", GPUs: 2, SimDuration: 600, SimUtilPct: &util,
			State: models.JobQueued, Reason: "submitted", SubmittedAt: now.Add(-time.Hour), ExecutedS: 120.3, AttainedService: 240.7,
			Command: models.Strings{"python", "train.py"}, Env: models.Strings{"A=1"}, Model: "resnet50", QueueIndex: 1, QueueSince: 5}
	}
	kinds := map[string]func(j *models.Job){
		"waiting": func(j *models.Job) {},
		"placed by the engine": func(j *models.Job) {
			j.Reason = "stored reason"
		},
		"running": func(j *models.Job) {
			j.State, j.Run, j.Placement, j.LastStartAt, j.StartedAt = models.JobRunning, 2, models.Strings{"m1:0", "m2:1"}, ago(10*time.Minute), ago(20*time.Minute)
			j.RunAccrualS, j.RunGPUSeconds, j.HeldGPUs = 60, 90.1, 1.5
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
		"another team's":          func(j *models.Job) { j.Team, j.User, j.Name = "nlp", "bob", "bob's <secret> \"run\"" },
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
	waits := map[int64]sched.Wait{byName["placed by the engine"]: {JobID: byName["placed by the engine"], Position: 3, Reason: "waits for 2 GPUs"}}
	held := map[int64]engine.HeldExit{byName["running, its end held"]: {Run: 3, Node: "m1", At: now.Add(-time.Second), Since: now}}
	silent := map[string]time.Time{"quiet": now.Add(-time.Minute)}
	forecasts := map[int64]engine.JobForecast{byName["forecast"]: {State: "estimated", Likely: now.Add(time.Hour), Reason: "after job 7", MadeAt: now}}
	m := newMoment(now, running, []models.Team{{Name: "vision", GuaranteeGPUs: 1}}, nil, func(int64) bool { return true })
	m.Waits, m.held, m.silent, m.forecasts = waits, held, silent, forecasts
	for i := range whole {
		for _, visible := range []bool{true, false} {
			want, got := m.queueJob(&whole[i], visible), m.queueJob(&part[i], visible)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s (visible %v): from QueueJobsByID\n%+v\nfrom the whole row\n%+v", whole[i].Name, visible, got, want)
			}
		}
	}

	// The queues' answer, as the API writes it, from either read.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	paged, wholly := New(Config{Store: store, Engine: &fakeEngine{}, Logger: quiet}), New(Config{Store: wholeRows{store}, Engine: &fakeEngine{}, Logger: quiet})
	qm, err := paged.Moment(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(qm.queued) != len(ids) {
		t.Fatalf("the moment holds %d unfinished jobs, want %d", len(qm.queued), len(ids))
	}
	qm.Waits, qm.held, qm.silent, qm.forecasts, qm.orders = waits, held, silent, forecasts, nil
	users := map[string]*User{}
	for _, u := range []struct {
		name string
		role models.Role
		team string
	}{{"alice", models.RoleResearcher, "vision"}, {"bob", models.RoleResearcher, "nlp"}, {"admin", models.RoleAdmin, ""}} {
		row, err := store.CreateUser(ctx, u.name, "password1", u.role, u.team)
		if err != nil {
			t.Fatal(err)
		}
		users[u.name] = userView(row)
	}
	for _, who := range []string{"alice", "bob", "admin"} {
		for _, p := range []QueuePage{{Queue: -1, Limit: 100}, {Queue: -1, Limit: 3}, {Queue: 0, Offset: 2, Limit: 4, Only: true}} {
			var answers [2][]byte
			for k, a := range []*App{paged, wholly} {
				q, err := a.QueuesAt(ctx, qm, Actor{User: users[who]}, p)
				if err != nil {
					t.Fatal(err)
				}
				if answers[k], err = json.Marshal(q); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(answers[0], answers[1]) {
				t.Errorf("%s, page %+v: the answer from QueueJobsByID\n%s\nfrom the whole rows\n%s", who, p, answers[0], answers[1])
			}
			if !bytes.Contains(answers[0], []byte(`"id":`)) {
				t.Errorf("%s, page %+v: no job in the answer %s", who, p, answers[0])
			}
		}
	}
}
