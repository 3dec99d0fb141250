package app

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
)

// TestBatchPriorities: which batch priorities a job may have is its
// team's to say (normal and low unless an admin allows high), and a
// team's high-priority jobs ask for no more GPUs than its cap; the
// refusal names the field and says why.
func TestBatchPriorities(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	alice := Actor{User: f.users["alice"]}
	submit := func(req api.SubmitRequest) error {
		req.Name = "j"
		if req.Team == "" {
			req.Team = "vision"
		}
		if req.GPUs == 0 {
			req.GPUs = 1
		}
		req.Sim = &api.SimSpec{DurationS: 60}
		_, err := f.app.Submit(ctx, alice, req)
		return err
	}
	refused := func(t *testing.T, err error, says string) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) || e.Kind != Invalid {
			t.Fatalf("got %v, want invalid", err)
		}
		msg, ok := e.Fields["priority"]
		if !ok || !strings.Contains(msg, says) {
			t.Fatalf("fields %v, want priority saying %q", e.Fields, says)
		}
	}
	if err := submit(api.SubmitRequest{Priority: "low"}); err != nil {
		t.Fatalf("low by default: %v", err)
	}
	if err := submit(api.SubmitRequest{Priority: "normal"}); err != nil {
		t.Fatalf("normal by name: %v", err)
	}
	refused(t, submit(api.SubmitRequest{Priority: "high"}), "team vision allows its jobs normal or low priority, not high")
	refused(t, submit(api.SubmitRequest{Priority: "urgent"}), `unknown priority "urgent"`)
	s := api.SubmitRequest{Name: "s", Team: "vision", GPUs: 1, Priority: "low", Command: api.Command{"true"}, Session: &api.SessionRequest{Type: "terminal"}}
	s.Sim = nil
	_, err := f.app.Submit(ctx, alice, s)
	refused(t, err, "is for batch jobs")

	// Who may set the policy: admins only, and what they set is checked.
	policy := api.BatchPolicy{Priorities: []string{"low", "high", "normal"}, HighGPUs: 3}
	for who, want := range map[string]Kind{"alice": Forbidden, "visionlead": Forbidden, "nlplead": Forbidden} {
		if err := f.app.SetBatchPolicy(ctx, Actor{User: f.users[who]}, "vision", policy); KindOf(err) != want {
			t.Errorf("%s sets vision's batch policy: %v, want %v", who, err, want)
		}
	}
	admin := Actor{User: f.users["admin"]}
	for _, bad := range []struct {
		p     api.BatchPolicy
		field string
	}{
		{api.BatchPolicy{Priorities: nil}, "priorities"},
		{api.BatchPolicy{Priorities: []string{"urgent"}}, "priorities"},
		{api.BatchPolicy{Priorities: []string{"high"}, HighGPUs: -1}, "high_gpus"},
	} {
		var e *Error
		if err := f.app.SetBatchPolicy(ctx, admin, "vision", bad.p); !errors.As(err, &e) || e.Kind != Invalid || e.Field != bad.field {
			t.Errorf("%+v: %v, want invalid %s", bad.p, err, bad.field)
		}
	}
	if err := f.app.SetBatchPolicy(ctx, admin, "nosuch", policy); KindOf(err) != NotFound {
		t.Errorf("a team that does not exist: %v", err)
	}
	if err := f.app.SetBatchPolicy(ctx, admin, "vision", policy); err != nil {
		t.Fatal(err)
	}
	tm, err := f.store.Team(ctx, "vision")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(tm.Priorities(), ","); got != "high,normal,low" || tm.HighPriorityGPUs != 3 {
		t.Fatalf("stored %q, %d GPUs; want high,normal,low (highest first), 3", got, tm.HighPriorityGPUs)
	}

	// The cap counts the team's unfinished high-priority jobs, arrays by
	// their tasks.
	if err := submit(api.SubmitRequest{Priority: "high", GPUs: 2}); err != nil {
		t.Fatalf("first high-priority job: %v", err)
	}
	refused(t, submit(api.SubmitRequest{Priority: "high", GPUs: 2}), "may ask for 3 GPUs at once; 2 are asked for already, and this job asks for 2")
	refused(t, submit(api.SubmitRequest{Priority: "high", Array: "0-1"}), "this job asks for 2")
	if err := submit(api.SubmitRequest{Priority: "high"}); err != nil {
		t.Fatalf("a job within the cap: %v", err)
	}
	// Another team's high-priority jobs do not count, and nlp does not allow it.
	bob := Actor{User: f.users["bob"]}
	if _, err := f.app.Submit(ctx, bob, api.SubmitRequest{Name: "b", Team: "nlp", GPUs: 1, Priority: "high", Sim: &api.SimSpec{DurationS: 60}}); KindOf(err) != Invalid {
		t.Errorf("bob's high-priority job in nlp: %v, want refused", err)
	}
	// Low only: normal is refused.
	if err := f.app.SetBatchPolicy(ctx, admin, "vision", api.BatchPolicy{Priorities: []string{"low"}}); err != nil {
		t.Fatal(err)
	}
	refused(t, submit(api.SubmitRequest{}), "team vision allows its jobs low priority, not normal")
	if err := submit(api.SubmitRequest{Priority: "low"}); err != nil {
		t.Fatalf("low when only low is allowed: %v", err)
	}
}
