package accounting

import (
	"math"
	"testing"
	"time"
)

var day0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func at(h float64) time.Time { return day0.Add(time.Duration(h * float64(time.Hour))) }
func atp(h float64) *time.Time {
	t := at(h)
	return &t
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// hourly samples of one GPU from hour from to hour to at util.
func hourly(gpu string, from, to int, util float64) []Sample {
	var out []Sample
	for h := from; h < to; h++ {
		out = append(out, Sample{GPU: gpu, Start: at(float64(h)), Step: time.Hour, Util: util})
	}
	return out
}

// TestMeasure: each rule of how GPU time is counted, in GPU-hours.
func TestMeasure(t *testing.T) {
	a := Key{"nlp", "alice"}
	b := Key{"vision", "bob"}
	tests := []struct {
		name    string
		runs    []Run
		samples []Sample
		now     float64 // hours after day0
		want    map[int]map[Key]Usage
	}{
		{"a run holds its GPUs for its duration",
			[]Run{{Job: 1, Team: "nlp", User: "alice", GPUs: []string{"n1:0", "n1:1"}, Start: at(2), End: atp(5), State: "succeeded"}},
			nil, 48,
			map[int]map[Key]Usage{0: {a: {Allocated: 6}}}},
		{"utilization weights the time used; below the threshold it is idle",
			[]Run{{Job: 1, Team: "nlp", User: "alice", GPUs: []string{"n1:0"}, Start: at(0), End: atp(4)}},
			append(hourly("n1:0", 0, 2, 0.8), hourly("n1:0", 2, 3, 0.01)...), 48,
			map[int]map[Key]Usage{0: {a: {Allocated: 4, Used: 1.61, Sampled: 3, IdleAllocated: 1}}}},
		{"a run across midnight counts on both days",
			[]Run{{Job: 1, Team: "nlp", User: "alice", GPUs: []string{"n1:0"}, Start: at(22), End: atp(27)}},
			nil, 48,
			map[int]map[Key]Usage{0: {a: {Allocated: 2}}, 1: {a: {Allocated: 3}}}},
		{"a run in progress counts up to now",
			[]Run{{Job: 1, Team: "nlp", User: "alice", GPUs: []string{"n1:0", "n1:1", "n1:2", "n1:3"}, Start: at(10)}},
			nil, 12.5,
			map[int]map[Key]Usage{0: {a: {Allocated: 10}}}},
		{"sharing jobs hold their fractions; used is weighted by them",
			[]Run{
				{Job: 1, Team: "nlp", User: "alice", GPUs: []string{"n1:0"}, Sharing: true, Fraction: 0.25, Start: at(0), End: atp(2)},
				{Job: 2, Team: "vision", User: "bob", GPUs: []string{"n1:0"}, Sharing: true, Fraction: 0.5, Start: at(1), End: atp(2)},
			},
			hourly("n1:0", 0, 2, 0.6), 48,
			map[int]map[Key]Usage{0: {a: {Allocated: 0.5, Used: 0.3, Sampled: 0.5}, b: {Allocated: 0.5, Used: 0.3, Sampled: 0.5}}}},
		{"sharing jobs without a fraction split the GPU evenly, scaled to one GPU",
			[]Run{
				{Job: 1, Team: "nlp", User: "alice", GPUs: []string{"n1:0"}, Sharing: true, Start: at(0), End: atp(3)},
				{Job: 2, Team: "vision", User: "bob", GPUs: []string{"n1:0"}, Sharing: true, Start: at(0), End: atp(3)},
			},
			nil, 48,
			map[int]map[Key]Usage{0: {a: {Allocated: 1.5}, b: {Allocated: 1.5}}}},
		{"a run before the range or after now counts nothing",
			[]Run{{Job: 1, Team: "nlp", User: "alice", GPUs: []string{"n1:0"}, Start: at(-5), End: atp(-1)},
				{Job: 2, Team: "nlp", User: "alice", GPUs: []string{"n1:0"}, Start: at(30)}},
			nil, 20,
			map[int]map[Key]Usage{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Measure(tc.runs, tc.samples, day0, day0.AddDate(0, 0, 2), at(tc.now), 0.05)
			for d, keys := range tc.want {
				for k, w := range keys {
					g := got[day0.AddDate(0, 0, d)][k]
					h := func(s float64) float64 { return s / 3600 }
					if !near(h(g.Allocated), w.Allocated) || !near(h(g.Used), w.Used) || !near(h(g.Sampled), w.Sampled) || !near(h(g.IdleAllocated), w.IdleAllocated) {
						t.Errorf("day %d %v: allocated %.4f used %.4f sampled %.4f idle %.4f GPU-hours; want %+v",
							d, k, h(g.Allocated), h(g.Used), h(g.Sampled), h(g.IdleAllocated), w)
					}
				}
			}
			n := 0
			for _, keys := range got {
				n += len(keys)
			}
			wn := 0
			for _, keys := range tc.want {
				wn += len(keys)
			}
			if n != wn {
				t.Errorf("%d figures, want %d: %v", n, wn, got)
			}
		})
	}
}

// TestBuildAddsUp: users add up to teams, teams to periods, periods to
// the total; outcomes count by state name, so a new final state slots in.
func TestBuildAddsUp(t *testing.T) {
	runs := []Run{
		{Job: 1, Team: "nlp", User: "alice", GPUs: []string{"n1:0", "n1:1"}, Start: at(1), End: atp(3), State: "succeeded"},
		{Job: 2, Team: "nlp", User: "carol", GPUs: []string{"n1:2"}, Start: at(20), End: atp(30), State: "preempted"},
		{Job: 2, Team: "nlp", User: "carol", GPUs: []string{"n1:2"}, Start: at(31), End: atp(33), State: "timed_out"},
		{Job: 3, Team: "vision", User: "bob", GPUs: []string{"n2:0"}, Start: at(2), End: atp(4), State: "queued"},
		{Job: 3, Team: "vision", User: "bob", GPUs: []string{"n2:1"}, Start: at(5)},
	}
	jobs := []Job{
		{ID: 1, Team: "nlp", User: "alice", SubmittedAt: at(0), FirstStart: atp(1), State: "succeeded", FinishedAt: atp(3)},
		{ID: 2, Team: "nlp", User: "carol", SubmittedAt: at(18), FirstStart: atp(20), State: "timed_out", FinishedAt: atp(33)},
		{ID: 3, Team: "vision", User: "bob", SubmittedAt: at(1), FirstStart: atp(2), State: "running"},
	}
	now := at(40)
	days := Measure(runs, nil, day0, day0.AddDate(0, 0, 2), now, 0.05)
	opt := Options{From: day0, To: day0.AddDate(0, 0, 2), Period: PerDay}
	opt.By = ByUser
	users := Build(days, jobs, runs, opt)
	opt.By = ByTeam
	teams := Build(days, jobs, runs, opt)

	// Allocated equals the runs' durations x GPUs.
	want := (2*2 + 10 + 2 + 2 + 35) * 3600.0
	if !near(teams.Total.Allocated, want) || !near(users.Total.Allocated, want) {
		t.Errorf("allocated %v (teams), %v (users); want %v", teams.Total.Allocated, users.Total.Allocated, want)
	}
	for _, tr := range teams.Rows {
		sum := 0.0
		for _, ur := range users.Rows {
			if ur.Team == tr.Team && ur.Period.Equal(tr.Period) {
				sum += ur.Allocated
			}
		}
		if !near(sum, tr.Allocated) {
			t.Errorf("%s on %v: users sum to %v, team has %v", tr.Team, tr.Period, sum, tr.Allocated)
		}
	}
	if got := teams.Total.Outcomes; got["succeeded"] != 1 || got["timed_out"] != 1 || len(got) != 2 {
		t.Errorf("outcomes %v", got)
	}
	if teams.Total.Preempted != 1 || teams.Total.Requeued != 1 || teams.Total.Started != 3 {
		t.Errorf("preempted %d requeued %d started %d", teams.Total.Preempted, teams.Total.Requeued, teams.Total.Started)
	}
	if teams.Total.QueueWaitMedianS != 3600 || teams.Total.QueueWaitP95S != 7200 {
		t.Errorf("queue wait median %v p95 %v", teams.Total.QueueWaitMedianS, teams.Total.QueueWaitP95S)
	}
	opt.Include = func(k Key) bool { return k.Team == "nlp" }
	nlp := Build(days, jobs, runs, opt)
	if len(nlp.Rows) == 0 || !near(nlp.Total.Allocated, (4+10+2)*3600) {
		t.Errorf("nlp only: %d rows, %v allocated", len(nlp.Rows), nlp.Total.Allocated)
	}
	month := Build(days, jobs, runs, Options{From: day0, To: day0.AddDate(0, 0, 2), By: ByTeam, Period: PerMonth})
	if len(month.Periods) != 1 || !near(month.Periods[0].Allocated, want) {
		t.Errorf("per month: %+v", month.Periods)
	}
}

// TestUsageParts: allocated time is used, idle or unsampled, never two of
// them: time no sample covers is not called idle.
func TestUsageParts(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		u                       Usage
		wantIdle, wantUnsampled float64
	}{
		{"all sampled, half used", Usage{Allocated: 10, Used: 5, Sampled: 10}, 5, 0},
		{"nothing sampled", Usage{Allocated: 10}, 0, 10},
		{"part sampled, all of it used", Usage{Allocated: 10, Used: 4, Sampled: 4}, 0, 6},
		{"part sampled, part used", Usage{Allocated: 10, Used: 3, Sampled: 8}, 5, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idle, uns := tc.u.Idle(), tc.u.Unsampled()
			if idle != tc.wantIdle || uns != tc.wantUnsampled {
				t.Errorf("idle %g unsampled %g, want %g and %g", idle, uns, tc.wantIdle, tc.wantUnsampled)
			}
			if sum := tc.u.Used + idle + uns; sum != tc.u.Allocated {
				t.Errorf("used + idle + unsampled = %g, want allocated %g", sum, tc.u.Allocated)
			}
		})
	}
}

// TestBuildReclaimed: the idle GPU time a reclaim gave back counts on the
// day of the reclaim, for the run's team and user, and adds up to the
// periods and the total; runs never reclaimed count nothing.
func TestBuildReclaimed(t *testing.T) {
	runs := []Run{
		{Job: 1, Team: "nlp", User: "alice", GPUs: []string{"n1:0", "n1:1"}, Start: at(1), End: atp(3), State: "cancelled",
			ReclaimedAt: atp(2.99), ReclaimedGPUSeconds: 2 * 1800},
		{Job: 2, Team: "nlp", User: "carol", GPUs: []string{"n1:2"}, Start: at(20), End: atp(24.5), State: "preempted",
			ReclaimedAt: atp(24.4), ReclaimedGPUSeconds: 600},
		{Job: 2, Team: "nlp", User: "carol", GPUs: []string{"n1:2"}, Start: at(25), End: atp(26), State: "succeeded"},
		{Job: 3, Team: "vision", User: "bob", GPUs: []string{"n2:0"}, Start: at(2), End: atp(4), State: "preempted",
			ReclaimedAt: atp(3.5), ReclaimedGPUSeconds: 900},
		{Job: 4, Team: "vision", User: "bob", GPUs: []string{"n2:1"}, Start: at(30), End: atp(50), State: "cancelled",
			ReclaimedAt: atp(49), ReclaimedGPUSeconds: 7}, // after the range
	}
	from, to := day0, day0.AddDate(0, 0, 2)
	users := Build(nil, nil, runs, Options{From: from, To: to, By: ByUser, Period: PerDay})
	want := map[string]float64{"2026-11-01 nlp alice": 3600, "2026-11-02 nlp carol": 600, "2026-11-01 vision bob": 900}
	got := map[string]float64{}
	for _, r := range users.Rows {
		if r.ReclaimedGPUSeconds != 0 {
			got[r.Period.Format(time.DateOnly)+" "+r.Team+" "+r.User] = r.ReclaimedGPUSeconds
		}
	}
	if len(got) != len(want) {
		t.Errorf("reclaimed rows %v, want %v", got, want)
	}
	for k, w := range want {
		if !near(got[k], w) {
			t.Errorf("%s: reclaimed %v GPU-s, want %v", k, got[k], w)
		}
	}
	if !near(users.Total.ReclaimedGPUSeconds, 5100) || len(users.Periods) != 2 || !near(users.Periods[0].ReclaimedGPUSeconds, 4500) {
		t.Errorf("total %v (want 5100), periods %+v", users.Total.ReclaimedGPUSeconds, users.Periods)
	}
	nlp := Build(nil, nil, runs, Options{From: from, To: to, By: ByTeam, Period: Whole, Include: func(k Key) bool { return k.Team == "nlp" }})
	if len(nlp.Rows) != 1 || !near(nlp.Rows[0].ReclaimedGPUSeconds, 4200) {
		t.Errorf("nlp over the range: %+v, want one row of 4200 GPU-s", nlp.Rows)
	}
}
