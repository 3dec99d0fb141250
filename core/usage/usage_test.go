package usage

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestCurrent(t *testing.T) {
	since := at(0)
	late := at(100)
	for _, tc := range []struct {
		name  string
		ended Service
		gpus  int
		since *time.Time
		now   time.Time
		want  Service
	}{
		{"not running: the ended runs", Service{30, 60}, 2, nil, at(50), Service{30, 60}},
		{"running: plus the run in progress", Service{30, 60}, 2, &since, at(50), Service{80, 160}},
		{"first run", Service{}, 4, &since, at(10), Service{10, 40}},
		{"a run that starts later adds nothing", Service{5, 5}, 1, &late, at(50), Service{5, 5}},
		{"no GPUs attain no service", Service{}, 0, &since, at(10), Service{10, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Current(tc.ended, Whole(tc.gpus), tc.since, tc.now); got != tc.want {
				t.Errorf("Current = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestAttainedShare: a sharing job's attained service counts the share
// of its GPU that Shares gives it, not the whole GPU, as its held GPUs
// change with the jobs beside it.
func TestAttainedShare(t *testing.T) {
	equal := Claim{Sharing: true}
	half := Claim{Sharing: true, Fraction: 0.5}
	// held is job 0's share of one GPU among claims.
	held := func(claims ...Claim) float64 { return Shares(nil, claims)[0] }
	type change struct {
		at     float64 // seconds into the run
		claims []Claim // the jobs on the GPU from then on, job 0 first
	}
	for _, tc := range []struct {
		name    string
		changes []change
		ran     float64
		want    float64 // GPU-seconds of job 0 after ran seconds
	}{
		{"alone, whole GPU", []change{{0, []Claim{{}}}}, 120, 120},
		{"alone, sharing", []change{{0, []Claim{equal}}}, 120, 120},
		{"alone, asked for half", []change{{0, []Claim{half}}}, 120, 60},
		{"2 sharers", []change{{0, []Claim{equal, equal}}}, 120, 60},
		{"5 sharers", []change{{0, []Claim{equal, equal, equal, equal, equal}}}, 120, 24},
		{"half beside 4 equal sharers", []change{{0, []Claim{half, equal, equal, equal, equal}}}, 100, 100 * 0.5 / (0.5 + 4*0.2)},
		{"share changes mid-run: alone, then 2, then 5, then alone", []change{
			{0, []Claim{equal}},
			{60, []Claim{equal, equal}},
			{120, []Claim{equal, equal, equal, equal, equal}},
			{170, []Claim{equal}},
		}, 200, 60 + 30 + 10 + 30},
		{"a change at the start counts from the start", []change{{0, []Claim{{}}}, {0, []Claim{equal, equal}}}, 10, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a Accrual
			for _, c := range tc.changes {
				a = a.Reheld(c.at, held(c.claims...))
			}
			ended := Service{ExecutedS: 7, GPUSeconds: 11}
			got := ended.Ran(tc.ran, a)
			if !near(got.GPUSeconds, 11+tc.want) || got.ExecutedS != 7+tc.ran {
				t.Errorf("Ran(%v) = %+v, want executed %v and %v GPU-seconds", tc.ran, got, 7+tc.ran, 11+tc.want)
			}
			// The GPU-seconds never exceed the seconds run on one GPU.
			if got.GPUSeconds-11 > tc.ran+1e-9 {
				t.Errorf("%v GPU-seconds in %v seconds on one GPU", got.GPUSeconds-11, tc.ran)
			}
		})
	}
}

func TestAccrualBeforeAt(t *testing.T) {
	a := Whole(2).Reheld(100, 1)
	if got := a.Reheld(50, 0.5); got.At != 100 || got.GPUSeconds != 200 || got.Held != 0.5 {
		t.Errorf("a change before At = %+v, want At 100, 200 GPU-seconds, held 0.5", got)
	}
	if got := (Service{}).Ran(50, a); got.GPUSeconds != 200 {
		t.Errorf("Ran before At = %+v, want the 200 GPU-seconds accrued", got)
	}
}

func TestHeld(t *testing.T) {
	for _, tc := range []struct {
		name string
		runs []Run
		want map[int64]float64
	}{
		{"whole GPUs", []Run{{Job: 1, GPUs: []string{"n:0", "n:1"}}, {Job: 2, GPUs: []string{"n:2"}}},
			map[int64]float64{1: 2, 2: 1}},
		{"sharing jobs without a fraction split their GPU",
			[]Run{{Job: 1, Sharing: true, GPUs: []string{"n:0"}}, {Job: 2, Sharing: true, GPUs: []string{"n:0"}},
				{Job: 3, Sharing: true, GPUs: []string{"n:0"}}},
			map[int64]float64{1: 1.0 / 3, 2: 1.0 / 3, 3: 1.0 / 3}},
		{"a sharing job alone holds its GPU", []Run{{Job: 1, Sharing: true, GPUs: []string{"n:0"}}},
			map[int64]float64{1: 1}},
		{"a fraction counts as asked",
			[]Run{{Job: 1, Sharing: true, Fraction: 0.25, GPUs: []string{"n:0"}}, {Job: 2, Sharing: true, Fraction: 0.5, GPUs: []string{"n:0"}}},
			map[int64]float64{1: 0.25, 2: 0.5}},
		{"fractions and a share: f, and 1/n",
			[]Run{{Job: 1, Sharing: true, Fraction: 0.25, GPUs: []string{"n:0"}}, {Job: 2, Sharing: true, GPUs: []string{"n:0"}}},
			map[int64]float64{1: 0.25, 2: 0.5}},
		{"shares past one GPU are scaled to one",
			[]Run{{Job: 1, Sharing: true, Fraction: 0.9, GPUs: []string{"n:0"}}, {Job: 2, Sharing: true, Fraction: 0.6, GPUs: []string{"n:0"}}},
			map[int64]float64{1: 0.6, 2: 0.4}},
		{"two whole jobs on one GPU (a stale placement) hold it once",
			[]Run{{Job: 1, GPUs: []string{"n:0"}}, {Job: 2, GPUs: []string{"n:0"}}},
			map[int64]float64{1: 0.5, 2: 0.5}},
		{"a run on no known GPU holds none", []Run{{Job: 1}}, map[int64]float64{1: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Of(tc.runs, nil)
			sum := 0.0
			for id, want := range tc.want {
				if got := f.Held(id); !near(got, want) {
					t.Errorf("Held(%d) = %v, want %v", id, got, want)
				}
				sum += want
			}
			if !near(f.InUseGPUs(), sum) {
				t.Errorf("InUseGPUs = %v, want %v", f.InUseGPUs(), sum)
			}
		})
	}
}

// TestNeverMoreThanTheCluster: whatever shares and placements, the GPUs
// held add up to at most the GPUs the jobs run on.
func TestNeverMoreThanTheCluster(t *testing.T) {
	fractions := []float64{0, 0.1, 0.3, 0.5, 0.7, 0.99, 1}
	var runs []Run
	for i := range 60 {
		runs = append(runs, Run{Job: int64(i + 1), Team: []string{"a", "b"}[i%2], Sharing: i%3 != 0,
			Fraction: fractions[i%len(fractions)], GPUs: []string{[]string{"n:0", "n:1", "n:2", "n:3"}[i%4]}})
	}
	f := Of(runs, map[string]int{"a": 1, "b": 1})
	if f.InUseGPUs() > 4+eps {
		t.Fatalf("60 jobs on 4 GPUs hold %v GPUs", f.InUseGPUs())
	}
	if sum := f.Team("a").InUseGPUs + f.Team("b").InUseGPUs; !near(sum, f.InUseGPUs()) {
		t.Errorf("teams hold %v, jobs %v", sum, f.InUseGPUs())
	}
}

// TestSevenSevenths: shares that make whole GPUs add up to whole GPUs,
// never a hair more than the cluster.
func TestSevenSevenths(t *testing.T) {
	var runs []Run
	for i := range 7 {
		runs = append(runs, Run{Job: int64(i + 1), Team: "a", Sharing: true, GPUs: []string{"n:0"}})
	}
	runs = append(runs, Run{Job: 8, Team: "a", GPUs: []string{"n:1", "n:2", "n:3", "n:4", "n:5", "n:6", "n:7"}})
	f := Of(runs, map[string]int{"a": 7})
	if f.InUseGPUs() != 8 || f.Team("a").InUseGPUs != 8 || f.Team("a").BorrowedGPUs != 1 {
		t.Errorf("in use %v, team %+v; want exactly 8 in use, 1 borrowed", f.InUseGPUs(), f.Team("a"))
	}
}

func TestBorrowed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		runs       []Run
		guarantees map[string]int
		borrowed   []int64
		team       Standing // of team "a"
	}{
		{"within the guarantee nothing borrows",
			[]Run{{Job: 1, Team: "a", GPUs: []string{"n:0"}, Since: at(0)}, {Job: 2, Team: "a", GPUs: []string{"n:1"}, Since: at(1)}},
			map[string]int{"a": 2}, nil, Standing{InUseGPUs: 2, GuaranteeGPUs: 2}},
		{"the latest run passes the guarantee",
			[]Run{{Job: 1, Team: "a", GPUs: []string{"n:0"}, Since: at(5)}, {Job: 2, Team: "a", GPUs: []string{"n:1"}, Since: at(1)}},
			map[string]int{"a": 1}, []int64{1}, Standing{InUseGPUs: 2, GuaranteeGPUs: 1, BorrowedGPUs: 1}},
		{"the scheduler's borrowers come last",
			[]Run{{Job: 1, Team: "a", GPUs: []string{"n:0"}, Since: at(0), Beyond: true}, {Job: 2, Team: "a", GPUs: []string{"n:1"}, Since: at(1)}},
			map[string]int{"a": 1}, []int64{1}, Standing{InUseGPUs: 2, GuaranteeGPUs: 1, BorrowedGPUs: 1}},
		{"shared GPUs count by share: six sharing jobs on two GPUs are within a guarantee of 2",
			[]Run{
				{Job: 1, Team: "a", Sharing: true, GPUs: []string{"n:0"}, Beyond: true}, {Job: 2, Team: "a", Sharing: true, GPUs: []string{"n:0"}, Beyond: true},
				{Job: 3, Team: "a", Sharing: true, GPUs: []string{"n:0"}, Beyond: true}, {Job: 4, Team: "a", Sharing: true, GPUs: []string{"n:1"}},
				{Job: 5, Team: "a", Sharing: true, GPUs: []string{"n:1"}}, {Job: 6, Team: "a", Sharing: true, GPUs: []string{"n:1"}},
			},
			map[string]int{"a": 2}, nil, Standing{InUseGPUs: 2, GuaranteeGPUs: 2}},
		{"no guarantee: every run borrows",
			[]Run{{Job: 1, Team: "a", Sharing: true, Fraction: 0.5, GPUs: []string{"n:0"}}},
			nil, []int64{1}, Standing{InUseGPUs: 0.5, BorrowedGPUs: 0.5}},
		{"other teams' jobs do not count",
			[]Run{{Job: 1, Team: "a", GPUs: []string{"n:0"}}, {Job: 2, Team: "b", GPUs: []string{"n:1"}}, {Job: 3, Team: "b", GPUs: []string{"n:2"}}},
			map[string]int{"a": 1, "b": 1}, []int64{3}, Standing{InUseGPUs: 1, GuaranteeGPUs: 1}},
		{"a team with a guarantee and no runs",
			nil, map[string]int{"a": 3}, nil, Standing{GuaranteeGPUs: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Of(tc.runs, tc.guarantees)
			want := make(map[int64]bool)
			for _, id := range tc.borrowed {
				want[id] = true
			}
			for _, r := range tc.runs {
				if f.Borrowed(r.Job) != want[r.Job] {
					t.Errorf("Borrowed(%d) = %v, want %v", r.Job, f.Borrowed(r.Job), want[r.Job])
				}
				if f.Borrowed(r.Job) && f.Team(r.Team).BorrowedGPUs <= 0 {
					t.Errorf("job %d borrows while team %s is within its guarantee", r.Job, r.Team)
				}
			}
			got := f.Team("a")
			if !near(got.InUseGPUs, tc.team.InUseGPUs) || got.GuaranteeGPUs != tc.team.GuaranteeGPUs || !near(got.BorrowedGPUs, tc.team.BorrowedGPUs) {
				t.Errorf("Team(a) = %+v, want %+v", got, tc.team)
			}
		})
	}
}

// TestOnGPUAndUtilized: each GPU lists the jobs placed on it with the
// shares Held adds up; a team's utilized GPUs are each GPU's utilization
// times the share its jobs hold, never more than the GPUs it holds.
func TestOnGPUAndUtilized(t *testing.T) {
	runs := []Run{
		{Job: 1, Team: "vision", GPUs: []string{"n:0", "n:1"}},
		{Job: 3, Team: "nlp", Sharing: true, Fraction: 0.25, GPUs: []string{"n:2"}},
		{Job: 2, Team: "vision", Sharing: true, GPUs: []string{"n:2"}},
	}
	f := Of(runs, map[string]int{"vision": 1, "nlp": 1, "speech": 2})
	for _, tc := range []struct {
		gpu  string
		want []Holding
	}{
		{"n:0", []Holding{{Job: 1, Share: 1}}},
		{"n:2", []Holding{{Job: 2, Share: 0.5}, {Job: 3, Share: 0.25}}}, // 1/n and f
		{"n:3", nil},
	} {
		got := f.OnGPU(tc.gpu)
		if len(got) != len(tc.want) {
			t.Errorf("OnGPU(%s) = %v, want %v", tc.gpu, got, tc.want)
			continue
		}
		for i := range got {
			if got[i].Job != tc.want[i].Job || !near(got[i].Share, tc.want[i].Share) {
				t.Errorf("OnGPU(%s) = %v, want %v", tc.gpu, got, tc.want)
			}
		}
	}
	util := map[string]float64{"n:0": 1, "n:1": 0.5, "n:2": 0.8, "n:9": 1}
	u := f.Utilized(func(g string) float64 { return util[g] })
	for team, want := range map[string]float64{"vision": 1 + 0.5 + 0.5*0.8, "nlp": 0.25 * 0.8, "speech": 0} {
		if !near(u[team], want) {
			t.Errorf("Utilized[%s] = %v, want %v", team, u[team], want)
		}
		if u[team] > f.Team(team).InUseGPUs+eps {
			t.Errorf("%s utilizes %v of the %v GPUs it holds", team, u[team], f.Team(team).InUseGPUs)
		}
	}
	if got := Of(nil, nil).Utilized(func(string) float64 { return 1 }); len(got) != 0 {
		t.Errorf("nothing running utilizes %v", got)
	}
}
