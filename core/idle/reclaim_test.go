package idle

import (
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	rule := Rule{After: 10 * time.Minute, BelowPct: 5}
	all := Policy{Sessions: true, Batch: true, MaxKeepAlive: 8 * time.Hour}
	sessionsOnly := Policy{Sessions: true}
	grace := 30 * time.Minute
	idleSince := func(since time.Time) State { return State{Idle: true, Known: true, Since: since} }
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	tests := []struct {
		name      string
		rule      Rule
		p         Policy
		grace     time.Duration
		c         Case
		now       time.Time
		want      Action
		reclaimAt time.Time
	}{
		{"working", rule, all, grace, Case{State: State{Known: true}, Session: true}, at(60), Leave, time.Time{}},
		{"unknown", rule, all, grace, Case{State: State{}, Session: true}, at(60), Leave, time.Time{}},
		{"low but not yet idle", rule, all, grace, Case{State: State{Known: true, Since: at(0)}, Session: true}, at(5), Leave, time.Time{}},
		{"idle session warned", rule, all, grace, Case{State: idleSince(at(0)), Session: true}, at(10), Warn, at(40)},
		{"idle session in grace", rule, all, grace, Case{State: idleSince(at(0)), Session: true}, at(39), Warn, at(40)},
		{"idle session reclaimed at end of grace", rule, all, grace, Case{State: idleSince(at(0)), Session: true}, at(40), Reclaim, at(40)},
		{"idle session reclaimed long after", rule, all, grace, Case{State: idleSince(at(0)), Session: true}, at(400), Reclaim, at(40)},
		{"zero grace reclaims at once", rule, all, 0, Case{State: idleSince(at(0)), Session: true}, at(10), Reclaim, at(10)},
		{"negative grace is zero", rule, all, -time.Minute, Case{State: idleSince(at(0)), Session: true}, at(10), Reclaim, at(10)},
		{"kept alive: left", rule, all, grace, Case{State: idleSince(at(0)), Session: true, KeepAliveUntil: at(120)}, at(100), Leave, time.Time{}},
		{"keep-alive ended: warned, grace from its end", rule, all, grace, Case{State: idleSince(at(0)), Session: true, KeepAliveUntil: at(120)}, at(120), Warn, at(150)},
		{"keep-alive ended long ago", rule, all, grace, Case{State: idleSince(at(0)), Session: true, KeepAliveUntil: at(5)}, at(20), Warn, at(40)},
		{"keep-alive ended and grace over", rule, all, grace, Case{State: idleSince(at(0)), Session: true, KeepAliveUntil: at(120)}, at(150), Reclaim, at(150)},
		{"batch spared by policy", rule, sessionsOnly, grace, Case{State: idleSince(at(0))}, at(400), Leave, time.Time{}},
		{"batch reclaimed where policy says", rule, all, grace, Case{State: idleSince(at(0))}, at(400), Reclaim, at(40)},
		{"sessions spared by policy", rule, Policy{Batch: true}, grace, Case{State: idleSince(at(0)), Session: true}, at(400), Leave, time.Time{}},
		{"no rule", Rule{}, all, grace, Case{State: idleSince(at(0)), Session: true}, at(400), Leave, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(tt.rule, tt.p, tt.grace, tt.c, tt.now)
			if v.Action != tt.want || !v.ReclaimAt.Equal(tt.reclaimAt) {
				t.Errorf("Decide = %v reclaim at %v, want %v at %v", v.Action, v.ReclaimAt, tt.want, tt.reclaimAt)
			}
			if v.Action != Leave && !v.IdleAt.Equal(tt.c.State.Since.Add(tt.rule.After)) {
				t.Errorf("IdleAt = %v, want %v", v.IdleAt, tt.c.State.Since.Add(tt.rule.After))
			}
		})
	}
}
