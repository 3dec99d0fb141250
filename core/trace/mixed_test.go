package trace

import (
	"math"
	"reflect"
	"testing"
)

// TestMixed: the stream has the shape its config asks for, the same seed
// draws the same jobs, and a bad config is refused naming what is wrong.
func TestMixed(t *testing.T) {
	jobs, err := Mixed(DefaultMixed)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Mixed(DefaultMixed)
	if !reflect.DeepEqual(jobs, again) {
		t.Fatal("the same config draws other jobs")
	}
	other := DefaultMixed
	other.Seed++
	if o, _ := Mixed(other); reflect.DeepEqual(jobs, o) {
		t.Fatal("another seed draws the same jobs")
	}
	var big, limits, small int
	var work float64
	for i, j := range jobs {
		if j.ID != int64(i+1) || i > 0 && j.Submit < jobs[i-1].Submit || j.Submit < 0 || j.Submit >= DefaultMixed.LengthS {
			t.Fatalf("job %+v out of order or of the trace", j)
		}
		switch j.GPUs {
		case 8:
			big++
			if j.Duration < 120 || j.Duration > 300 || j.TimeLimitS != 0 {
				t.Errorf("8-GPU job %+v", j)
			}
		case 1:
			small++
			work += j.Duration
			if j.Duration < 30 || j.Duration > 600 {
				t.Errorf("1-GPU job %+v", j)
			}
			if j.TimeLimitS > 0 {
				limits++
				if j.TimeLimitS < 1.5*j.Duration || math.Mod(j.TimeLimitS, 60) != 0 {
					t.Errorf("1-GPU job %+v: limit", j)
				}
			}
		default:
			t.Fatalf("job %+v", j)
		}
	}
	if big != 48 {
		t.Errorf("%d 8-GPU jobs in a day, want one every 30 minutes", big)
	}
	if load := work / (8 * DefaultMixed.LengthS); math.Abs(load-0.74) > 0.05 {
		t.Errorf("1-GPU load %.3f, want about 0.74", load)
	}
	if share := float64(limits) / float64(small); math.Abs(share-0.5) > 0.05 {
		t.Errorf("%.2f of the 1-GPU jobs declare a limit, want about half", share)
	}
	for _, bad := range []MixedConfig{
		{},
		func() MixedConfig { c := DefaultMixed; c.SmallLoad = 1; return c }(),
		func() MixedConfig { c := DefaultMixed; c.BigGPUs = 9; return c }(),
		func() MixedConfig { c := DefaultMixed; c.SmallMaxS = 10; return c }(),
		func() MixedConfig { c := DefaultMixed; c.BigEveryS = 0; return c }(),
		func() MixedConfig { c := DefaultMixed; c.LimitShare = math.NaN(); return c }(),
	} {
		if _, err := Mixed(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestJittered: a jittered copy keeps the jobs, moves each submit time by
// at most the shift and scales each duration within the factor, keeps
// limits at least the durations, and depends only on its seed.
func TestJittered(t *testing.T) {
	jobs, err := Mixed(DefaultMixed)
	if err != nil {
		t.Fatal(err)
	}
	a, b := Jittered(jobs, 1, 60, 1.25), Jittered(jobs, 1, 60, 1.25)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed jitters differently")
	}
	if reflect.DeepEqual(a, Jittered(jobs, 2, 60, 1.25)) {
		t.Fatal("another seed jitters the same")
	}
	for i, j := range a {
		o := jobs[i]
		if j.ID != o.ID || j.GPUs != o.GPUs || math.Abs(j.Submit-o.Submit) > 60.5 ||
			j.Duration < math.Floor(o.Duration/1.25) || j.Duration > math.Ceil(o.Duration*1.25) ||
			o.TimeLimitS > 0 && j.TimeLimitS < j.Duration || o.TimeLimitS == 0 && j.TimeLimitS != 0 {
			t.Fatalf("job %+v jittered to %+v", o, j)
		}
	}
}

// TestSpecMixed: issue 30's stream has 1-GPU jobs at about 0.85 of 8 GPUs,
// an 8-GPU job every 30 minutes and sessions of 5 to 15 minutes, each
// with the team's 15-minute limit.
func TestSpecMixed(t *testing.T) {
	jobs, err := Mixed(SpecMixed)
	if err != nil {
		t.Fatal(err)
	}
	var big, sessions int
	var work float64
	for _, j := range jobs {
		switch {
		case j.Class == "session":
			sessions++
			if j.GPUs != 1 || j.Duration < 300 || j.Duration > 900 || j.TimeLimitS != 900 {
				t.Errorf("session %+v", j)
			}
		case j.GPUs == 8:
			big++
		default:
			work += j.Duration
		}
	}
	if big != 48 || sessions < 50 || sessions > 100 {
		t.Errorf("%d 8-GPU jobs and %d sessions in a day, want 48 and about 72", big, sessions)
	}
	if load := work / (8 * SpecMixed.LengthS); math.Abs(load-0.85) > 0.05 {
		t.Errorf("1-GPU load %.3f, want about 0.85", load)
	}
	bad := SpecMixed
	bad.SessionMaxS = 1
	if _, err := Mixed(bad); err == nil {
		t.Error("sessions of 300 to 1 s accepted")
	}
}
