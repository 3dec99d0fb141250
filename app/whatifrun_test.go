package app

import (
	"context"
	"errors"
	"testing"
)

// TestWhatIfIsForAdmins: only an admin replays the history; with
// nothing in it, the answer says what to change (days).
func TestWhatIfIsForAdmins(t *testing.T) {
	f := newFixture(t)
	f.job(t, false)
	in := f.app.DefaultWhatIf()
	for _, tc := range []struct{ actor, want string }{
		{"alice", "forbidden"}, {"carol", "forbidden"}, {"visionlead", "forbidden"}, {"bob", "forbidden"}, {"nlplead", "forbidden"},
		{"admin", "unprocessable"}, // no GPU was seen: nothing to replay on
	} {
		_, err := f.app.WhatIf(context.Background(), Actor{User: f.users[tc.actor]}, in)
		if got := outcome(err); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.actor, got, tc.want)
		}
	}
}

// TestParseWhatIf: each bad parameter is an invalid request naming it;
// good ones replace the defaults.
func TestParseWhatIf(t *testing.T) {
	def := WhatIfInput{Days: 7, Policies: []string{"fifo"}}
	for _, tc := range []struct {
		params map[string][]string
		field  string
	}{
		{map[string][]string{"days": {"0"}}, "days"},
		{map[string][]string{"days": {"91"}}, "days"},
		{map[string][]string{"policy": {"magic"}}, "policy"},
		{map[string][]string{"thresholds": {"800,200"}}, "thresholds"},
		{map[string][]string{"min_runtime_s": {"-1"}}, "min_runtime_s"},
		{map[string][]string{"half_life": {"soon"}}, "half_life"},
		{map[string][]string{"sharing": {"mps"}}, "sharing"},
	} {
		_, err := ParseWhatIf(tc.params, def)
		var e *Error
		if !errors.As(err, &e) || e.Kind != Invalid || e.Field != tc.field {
			t.Errorf("%v: %v, want invalid %s", tc.params, err, tc.field)
		}
	}
	in, err := ParseWhatIf(map[string][]string{"days": {"3"}, "policy": {"fifo", "srsf"}, "sharing": {"salus"}}, def)
	if err != nil || in.Days != 3 || len(in.Policies) != 2 || !in.Salus() {
		t.Errorf("parsed %+v, %v", in, err)
	}
}
