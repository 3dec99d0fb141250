package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/enginestore"
	"github.com/gpuportal/gpuportal/models"
)

// TestSessionPolicyLimits: a team's lead says whether its members may
// start sessions and how many GPUs the team's sessions may ask for at
// once (issue 30: which classes a team's members may use, how many GPUs
// each may hold). A session past either is refused naming the field and
// saying why; batch jobs are not bound by either.
func TestSessionPolicyLimits(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	alice, carol := Actor{User: f.users["alice"]}, Actor{User: f.users["carol"]}
	lead, admin := Actor{User: f.users["visionlead"]}, Actor{User: f.users["admin"]}
	session := func(a Actor, gpus int) (int64, error) {
		j, err := f.app.Submit(ctx, a, api.SubmitRequest{Name: "s", Team: "vision", GPUs: gpus,
			Session: &api.SessionRequest{Type: "terminal"}})
		if err != nil {
			return 0, err
		}
		return j.ID, nil
	}
	batch := func(gpus int) error {
		_, err := f.app.Submit(ctx, alice, api.SubmitRequest{Name: "b", Team: "vision", GPUs: gpus, Sim: &api.SimSpec{DurationS: 60}})
		return err
	}
	refused := func(t *testing.T, err error, field, says string) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) || e.Kind != Invalid {
			t.Fatalf("got %v, want invalid", err)
		}
		if msg, ok := e.Fields[field]; !ok || !strings.Contains(msg, says) {
			t.Fatalf("fields %v, want %s saying %q", e.Fields, field, says)
		}
	}
	policy := func() (off bool, maxGPUs, priorityGPUs int) {
		t.Helper()
		tm, err := f.store.Team(ctx, "vision")
		if err != nil {
			t.Fatal(err)
		}
		return tm.SessionsOff, tm.MaxSessionGPUs, tm.SessionPriorityGPUs
	}

	// By default sessions are allowed, without a cap.
	if off, maxGPUs, _ := policy(); off || maxGPUs != 0 {
		t.Fatalf("default policy: off %v, %d GPUs; want allowed, no cap", off, maxGPUs)
	}
	first, err := session(alice, 2)
	if err != nil {
		t.Fatalf("a session by default: %v", err)
	}

	// Off: every session is refused, batch jobs are not.
	if err := f.app.SetSessionPolicy(ctx, lead, "vision", api.SessionPolicy{Allowed: new(false)}); err != nil {
		t.Fatal(err)
	}
	if off, _, _ := policy(); !off {
		t.Fatal("sessions allowed after turning them off")
	}
	_, err = session(carol, 1)
	refused(t, err, "session", "team vision does not allow interactive sessions")
	if err := batch(1); err != nil {
		t.Fatalf("a batch job where sessions are off: %v", err)
	}
	// Another team is not bound by vision's policy.
	if _, err := f.app.Submit(ctx, Actor{User: f.users["bob"]}, api.SubmitRequest{Name: "s", Team: "nlp", GPUs: 1,
		Session: &api.SessionRequest{Type: "jupyter"}}); err != nil {
		t.Fatalf("bob's session in nlp: %v", err)
	}

	// A cap of 3, absent "allowed" reading as allowed: alice's first
	// session (2 GPUs, still waiting) counts, whoever asks next.
	if err := f.app.SetSessionPolicy(ctx, lead, "vision", api.SessionPolicy{MaxGPUs: 3, PriorityGPUs: 1}); err != nil {
		t.Fatal(err)
	}
	if off, maxGPUs, prio := policy(); off || maxGPUs != 3 || prio != 1 {
		t.Fatalf("policy: off %v, %d GPUs, %d with priority; want allowed, 3, 1", off, maxGPUs, prio)
	}
	_, err = session(carol, 2)
	refused(t, err, "gpus", "team vision's sessions may ask for 3 GPUs at once; 2 are asked for already, and this session asks for 2")
	second, err := session(carol, 1)
	if err != nil {
		t.Fatalf("a session within the cap: %v", err)
	}
	_, err = session(alice, 1)
	refused(t, err, "gpus", "3 are asked for already")
	if err := batch(2); err != nil {
		t.Fatalf("a batch job past the sessions' cap: %v", err)
	}
	// A session asked to end (here through a replica that does not
	// schedule, as its leader will carry it out) no longer counts, nor
	// one that ended.
	if err := f.store.RequestCancel(ctx, first, "cancelled by alice", time.Now()); err != nil {
		t.Fatal(err)
	}
	third, err := session(alice, 2)
	if err != nil {
		t.Fatalf("a session once another was asked to end: %v", err)
	}
	_, err = session(carol, 1)
	refused(t, err, "gpus", "3 are asked for already")
	if err := f.store.Cancel(ctx, second, "cancelled by carol", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := session(carol, 1); err != nil {
		t.Fatalf("a session once another ended: %v", err)
	}
	_ = third

	// Who may set it, and what is checked.
	for who, want := range map[string]Kind{"alice": Forbidden, "nlplead": Forbidden} {
		if err := f.app.SetSessionPolicy(ctx, Actor{User: f.users[who]}, "vision", api.SessionPolicy{}); KindOf(err) != want {
			t.Errorf("%s sets vision's session policy: %v, want %v", who, err, want)
		}
	}
	for _, bad := range []struct {
		p     api.SessionPolicy
		field string
	}{
		{api.SessionPolicy{MaxGPUs: -1}, "max_gpus"},
		{api.SessionPolicy{MaxGPUs: MaxGPUs + 1}, "max_gpus"},
		{api.SessionPolicy{MaxGPUs: 2, PriorityGPUs: 3}, "priority_gpus"},
	} {
		var e *Error
		if err := f.app.SetSessionPolicy(ctx, admin, "vision", bad.p); !errors.As(err, &e) || e.Kind != Invalid || e.Field != bad.field {
			t.Errorf("%+v: %v, want invalid %s", bad.p, err, bad.field)
		}
	}
	if _, maxGPUs, _ := policy(); maxGPUs != 3 {
		t.Errorf("a refused policy changed the stored cap to %d", maxGPUs)
	}
}

// TestTeamCapsHoldAtOnce: submissions that arrive together do not pass a
// team's cap together: of eight 1-GPU sessions submitted at once against
// a cap of 2, two are taken, and so for high-priority jobs.
func TestTeamCapsHoldAtOnce(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	admin := Actor{User: f.users["admin"]}
	if err := f.app.SetSessionPolicy(ctx, admin, "vision", api.SessionPolicy{MaxGPUs: 2}); err != nil {
		t.Fatal(err)
	}
	if err := f.app.SetBatchPolicy(ctx, admin, "vision", api.BatchPolicy{Priorities: []string{"high", "normal"}, HighGPUs: 2}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		req   api.SubmitRequest
		field string
	}{
		"sessions":           {api.SubmitRequest{Name: "s", Team: "vision", GPUs: 1, Session: &api.SessionRequest{Type: "terminal"}}, "gpus"},
		"high-priority jobs": {api.SubmitRequest{Name: "h", Team: "vision", GPUs: 1, Priority: "high", Sim: &api.SimSpec{DurationS: 60}}, "priority"},
	} {
		req := tc.req
		errs := make(chan error, 8)
		var wg sync.WaitGroup
		for _, who := range []string{"alice", "carol", "alice", "carol", "alice", "carol", "alice", "carol"} {
			wg.Go(func() {
				_, err := f.app.Submit(ctx, Actor{User: f.users[who]}, req)
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		taken := 0
		for err := range errs {
			var e *Error
			switch {
			case err == nil:
				taken++
			case !errors.As(err, &e) || e.Kind != Invalid || !strings.Contains(e.Fields[tc.field], "may ask for 2 GPUs at once; 2 are asked for already"):
				t.Errorf("%s: %v, want taken or refused naming %s", name, err, tc.field)
			}
		}
		if taken != 2 {
			t.Errorf("%s: %d of 8 submitted at once were taken against a cap of 2", name, taken)
		}
	}
}

// meanwhile is a store whose team policy a lead changes between a
// submission's validation and its storing: change runs before each
// capped create.
type meanwhile struct {
	*models.Store
	change func()
}

func (m meanwhile) CreateJobWithin(ctx context.Context, j *models.Job, c models.TeamCap) error {
	m.change()
	return m.Store.CreateJobWithin(ctx, j, c)
}

// TestPolicyChangedMeanwhile: a session validated under one policy and
// stored after its team's lead changed it is held to the policy as
// changed: refused naming session once sessions are off, naming gpus
// once the cap is below what it would take; nothing is stored.
func TestPolicyChangedMeanwhile(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	alice := Actor{User: f.users["alice"]}
	var p models.SessionPolicy
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := New(Config{Store: meanwhile{f.store, func() {
		if err := f.store.SetTeamSessionPolicy(ctx, "vision", p); err != nil {
			t.Error(err)
		}
	}}, Engine: &fakeEngine{stored: enginestore.Store{Store: f.store}}, Logger: quiet})
	session := func() error {
		_, err := a.Submit(ctx, alice, api.SubmitRequest{Name: "s", Team: "vision", GPUs: 1, Session: &api.SessionRequest{Type: "terminal"}})
		return err
	}
	for _, c := range []struct {
		policy      models.SessionPolicy
		field, says string
	}{
		{models.SessionPolicy{SessionsOff: true}, "session", "team vision does not allow interactive sessions"},
		{models.SessionPolicy{MaxSessionGPUs: 1}, "gpus", "team vision's sessions may ask for 1 GPUs at once; 1 are asked for already"},
	} {
		if c.field == "gpus" { // one session taken while there is room
			p = models.SessionPolicy{}
			if err := f.store.SetTeamSessionPolicy(ctx, "vision", p); err != nil {
				t.Fatal(err)
			}
			if err := session(); err != nil {
				t.Fatal(err)
			}
		}
		p = c.policy
		err := session()
		var e *Error
		if !errors.As(err, &e) || e.Kind != Invalid || !strings.Contains(e.Fields[c.field], c.says) {
			t.Errorf("a session once the policy is %+v: %v, want invalid naming %s saying %q", c.policy, err, c.field, c.says)
		}
	}
	if got, err := f.store.SessionGPUs(ctx, "vision"); err != nil || got != 1 {
		t.Errorf("vision's sessions ask for %d GPUs (%v), want 1: nothing refused was stored", got, err)
	}
}
