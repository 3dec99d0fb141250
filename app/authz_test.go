package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/enginestore"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/models/modelstest"
)

// fakeEngine records what the actions ask of the engine: one machine,
// gpu1, whose GPU 0 is out of service.
type fakeEngine struct {
	ClusterEngine // the cluster's views: not used here
	fakeJobEngine // the engine's reads of jobs (jobqueries_test.go)
	cancelled     []int64
	woken         atomic.Int32 // Wake, as the engine's, may be called at once from many requests
	// stored keeps the leader's reservations, which a follower reads
	// (StoredReservations); nil: none stored.
	stored engine.ReservationStore
}

func (e *fakeEngine) StoredReservations(ctx context.Context) ([]sched.Reservation, error) {
	if e.stored == nil {
		return nil, nil
	}
	return e.stored.Reservations(ctx)
}

// Scheduler is the job engine's (ClusterEngine, unused here, has one too).
func (e *fakeEngine) Scheduler() *sched.Scheduler { return e.fakeJobEngine.Scheduler() }

func (e *fakeEngine) Wake() { e.woken.Add(1) }
func (e *fakeEngine) Cancel(_ context.Context, id int64, _ string) error {
	e.cancelled = append(e.cancelled, id)
	return nil
}
func (e *fakeEngine) Nodes() []engine.Node { return nil }

// GoneNodes: no machine disconnected (a moment reads them, moment.go).
func (e *fakeEngine) GoneNodes() []engine.GoneNode { return nil }
func (e *fakeEngine) SetDraining(node string, _ bool) error {
	if node != "gpu1" {
		return engine.ErrUnknownNode
	}
	return nil
}
func (e *fakeEngine) SetCordoned(node string, on bool) error { return e.SetDraining(node, on) }
func (e *fakeEngine) ClearGPUFault(node string, index int) error {
	if node != "gpu1" || index != 0 {
		return engine.ErrGPUHealthy
	}
	return nil
}
func (e *fakeEngine) GPUFaults() []engine.GPUFault {
	return []engine.GPUFault{{Ref: gpu.Ref{Node: "gpu1", Index: 0}, Reason: "Xid 79"}}
}
func (e *fakeEngine) StoredNodeStates(context.Context) (engine.NodeStates, error) {
	return engine.NodeStates{}, nil
}

// fixture is an App on a real SQLite store with two teams: vision
// (alice, carol, their lead) and nlp (bob, its lead), and an admin.
type fixture struct {
	app   *App
	store *models.Store
	users map[string]*User
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	store, err := models.OpenWith(ctx, modelstest.SQLiteDSN(t), models.Options{PasswordCost: bcrypt.MinCost})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for _, team := range []string{"vision", "nlp"} {
		if _, err := store.CreateTeam(ctx, team, 2); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{store: store, users: map[string]*User{}}
	for _, u := range []struct {
		name string
		role models.Role
		team string
	}{
		{"alice", models.RoleResearcher, "vision"}, {"carol", models.RoleResearcher, "vision"},
		{"visionlead", models.RoleLead, "vision"}, {"bob", models.RoleResearcher, "nlp"},
		{"nlplead", models.RoleLead, "nlp"}, {"admin", models.RoleAdmin, ""},
	} {
		row, err := store.CreateUser(ctx, u.name, "password1", u.role, u.team)
		if err != nil {
			t.Fatal(err)
		}
		f.users[u.name] = userView(row)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.app = New(Config{Store: store, Engine: &fakeEngine{stored: enginestore.Store{Store: store}}, Logger: quiet})
	return f
}

// job stores a job of alice's in vision, running when running is set,
// and returns its ID.
func (f *fixture) job(t *testing.T, running bool) int64 {
	t.Helper()
	ctx := context.Background()
	j := &models.Job{Name: "j", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60, SubmittedAt: time.Now()}
	if err := f.store.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if running {
		if _, err := f.store.MarkStarted(ctx, j.ID, []string{"gpu1:0"}, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	return j.ID
}

// array stores an array of two tasks of alice's and returns its ID.
func (f *fixture) array(t *testing.T) int64 {
	t.Helper()
	var tasks []*models.Job
	for i := range 2 {
		tasks = append(tasks, &models.Job{Name: "a", Team: "vision", User: "alice", GPUs: 1, SimDuration: 60,
			SubmittedAt: time.Now(), ArrayIndex: i})
	}
	if err := f.store.CreateArray(context.Background(), tasks); err != nil {
		t.Fatal(err)
	}
	return tasks[0].ArrayID
}

// outcome is what an action's error says: "ok" for none, else its kind.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var e *Error
	if !errors.As(err, &e) {
		return "untyped: " + err.Error()
	}
	return e.Kind.String()
}

// TestJobActionsAuthorization: who may act on alice's job in vision. A
// job of another team is one that does not exist; a teammate sees it but
// may not change it; its owner, its team's lead and an admin may.
func TestJobActionsAuthorization(t *testing.T) {
	actions := []struct {
		name string
		do   func(t *testing.T, f *fixture, a Actor) error
	}{
		{"cancel", func(t *testing.T, f *fixture, a Actor) error {
			_, err := f.app.Cancel(context.Background(), a, f.job(t, false))
			return err
		}},
		{"resubmit", func(t *testing.T, f *fixture, a Actor) error {
			_, err := f.app.Resubmit(context.Background(), a, f.job(t, false))
			return err
		}},
		{"keep alive", func(t *testing.T, f *fixture, a Actor) error {
			_, err := f.app.KeepAlive(context.Background(), a, f.job(t, true), api.KeepAliveRequest{Hours: 1})
			return err
		}},
		{"cancel array", func(t *testing.T, f *fixture, a Actor) error {
			_, err := f.app.CancelArray(context.Background(), a, f.array(t))
			return err
		}},
		{"see", func(t *testing.T, f *fixture, a Actor) error {
			_, err := f.app.Job(context.Background(), a, f.job(t, false))
			return err
		}},
	}
	want := map[string]map[string]string{ // actor -> action -> outcome
		"alice":      {"cancel": "ok", "resubmit": "ok", "keep alive": "ok", "cancel array": "ok", "see": "ok"},
		"carol":      {"cancel": "forbidden", "resubmit": "forbidden", "keep alive": "forbidden", "cancel array": "forbidden", "see": "ok"},
		"visionlead": {"cancel": "ok", "resubmit": "ok", "keep alive": "ok", "cancel array": "ok", "see": "ok"},
		"bob":        {"cancel": "not found", "resubmit": "not found", "keep alive": "not found", "cancel array": "not found", "see": "not found"},
		"nlplead":    {"cancel": "not found", "resubmit": "not found", "keep alive": "not found", "cancel array": "not found", "see": "not found"},
		"admin":      {"cancel": "ok", "resubmit": "ok", "keep alive": "ok", "cancel array": "ok", "see": "ok"},
	}
	f := newFixture(t)
	for who, byAction := range want {
		for _, act := range actions {
			t.Run(who+"/"+act.name, func(t *testing.T) {
				err := act.do(t, f, Actor{User: f.users[who], From: "192.0.2.1"})
				if got := outcome(err); got != byAction[act.name] {
					t.Errorf("%s %s: %s (%v), want %s", who, act.name, got, err, byAction[act.name])
				}
			})
		}
	}
}

// TestKeepAliveHoursSaysWhichBound: a keep-alive longer than the team
// allows names the team's maximum as such, and one too short the least;
// it read "hours 20: want at least 1 second (0.0003), at most 8" for
// both (audit3).
func TestKeepAliveHoursSaysWhichBound(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	alice := Actor{User: f.users["alice"]}
	id := f.job(t, true)
	limit := f.app.maxKeepAlive(ctx, "vision").Hours()
	for _, tc := range []struct {
		hours float64
		want  string
	}{
		{limit + 1, fmt.Sprintf("hours %v: more than team vision's maximum keep-alive of %v hours", limit+1, limit)},
		{0, fmt.Sprintf("hours 0: want at least 1 second (0.0003 hours), at most team vision's maximum keep-alive of %v hours", limit)},
		{1e-300, "hours 1e-300: want at least 1 second"},
	} {
		_, err := f.app.KeepAlive(ctx, alice, id, api.KeepAliveRequest{Hours: tc.hours})
		var e *Error
		if !errors.As(err, &e) || e.Kind != Invalid || e.Field != "hours" || !strings.Contains(e.Msg, tc.want) {
			t.Errorf("hours %v: %v, want an invalid hours saying %q", tc.hours, err, tc.want)
		}
	}
}

// TestJobActionsOnNoJob: an ID that names no job is not found, for
// everyone, admin included.
func TestJobActionsOnNoJob(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for who, u := range f.users {
		a := Actor{User: u}
		if _, err := f.app.Cancel(ctx, a, 999); KindOf(err) != NotFound {
			t.Errorf("%s cancel: %v, want not found", who, err)
		}
		if _, err := f.app.Resubmit(ctx, a, 999); KindOf(err) != NotFound {
			t.Errorf("%s resubmit: %v, want not found", who, err)
		}
		if _, err := f.app.CancelArray(ctx, a, 999); KindOf(err) != NotFound {
			t.Errorf("%s cancel array: %v, want not found", who, err)
		}
	}
}

// TestResubmitRunsAsOwner: a lead's resubmission is the owner's job, and
// is audited; the owner's own is not.
func TestResubmitRunsAsOwner(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	j, err := f.app.Resubmit(ctx, Actor{User: f.users["visionlead"]}, f.job(t, false))
	if err != nil {
		t.Fatal(err)
	}
	if j.User != "alice" || j.Team != "vision" {
		t.Errorf("resubmitted as %s of %s, want alice of vision", j.User, j.Team)
	}
	entries, err := f.store.AuditLog(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Action != "job.resubmit" || entries[0].Actor != "visionlead" {
		t.Errorf("audit log %+v, want one job.resubmit by visionlead", entries)
	}
}

// TestCancelEndedJob: cancelling a job that has ended is a conflict, for
// one who may cancel it; the engine is not asked.
func TestCancelEndedJob(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	id := f.job(t, false)
	if err := f.store.Cancel(ctx, id, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.app.Cancel(ctx, Actor{User: f.users["alice"]}, id); KindOf(err) != Conflict {
		t.Errorf("cancel an ended job: %v, want conflict", err)
	}
}

// TestSubmitTeams: a researcher or lead submits only to their own team,
// an admin to any; refused submissions name the field and store nothing.
func TestSubmitTeams(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		who, team string
		want      string
	}{
		{"alice", "", "ok"}, {"alice", "vision", "ok"}, {"alice", "nlp", "invalid"},
		{"visionlead", "nlp", "invalid"}, {"bob", "vision", "invalid"},
		{"admin", "vision", "ok"}, {"admin", "nlp", "ok"}, {"admin", "", "invalid"},
	} {
		req := api.SubmitRequest{Name: "s", Team: tc.team, GPUs: 1, Sim: &api.SimSpec{DurationS: 60}}
		j, err := f.app.Submit(ctx, Actor{User: f.users[tc.who]}, req)
		if got := outcome(err); got != tc.want {
			t.Errorf("%s submits to %q: %s (%v), want %s", tc.who, tc.team, got, err, tc.want)
			continue
		}
		if err != nil {
			var e *Error
			if errors.As(err, &e); e.Field != "team" || e.Fields["team"] == "" {
				t.Errorf("%s submits to %q: refused on %q (%v), want the team field", tc.who, tc.team, e.Field, e.Fields)
			}
			continue
		}
		if j.User != tc.who || j.ID == 0 {
			t.Errorf("%s submits: stored %+v", tc.who, j)
		}
	}
}

// TestNodeActionsAdminsOnly: only an admin drains, cordons or clears a
// GPU; an unknown machine or a healthy GPU is not found.
func TestNodeActionsAdminsOnly(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for who, u := range f.users {
		a := Actor{User: u}
		want := "forbidden"
		if who == "admin" {
			want = "ok"
		}
		for _, act := range []NodeAction{DrainNode, ResumeNode, CordonNode, UncordonNode} {
			if got := outcome(f.app.ActOnNode(ctx, a, "gpu1", act)); got != want {
				t.Errorf("%s %s: %s, want %s", who, act, got, want)
			}
		}
		if got := outcome(f.app.ClearGPU(ctx, a, "gpu1", 0)); got != want {
			t.Errorf("%s clears a GPU: %s, want %s", who, got, want)
		}
	}
	admin := Actor{User: f.users["admin"]}
	if err := f.app.ActOnNode(ctx, admin, "nowhere", DrainNode); KindOf(err) != NotFound {
		t.Errorf("drain an unknown machine: %v, want not found", err)
	}
	if err := f.app.ClearGPU(ctx, admin, "gpu1", 1); KindOf(err) != NotFound {
		t.Errorf("clear a healthy GPU: %v, want not found", err)
	}
	if err := f.app.ClearGPU(ctx, admin, "gpu1", -1); KindOf(err) != Invalid {
		t.Errorf("clear GPU -1: %v, want invalid", err)
	}
}
