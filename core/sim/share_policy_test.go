package sim

import (
	"context"
	"math"
	"testing"

	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/salussim"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// TestLanePolicyGolden checks the lane policies on tiny scenarios worked
// out by hand: one 16 GiB GPU and 600-milli jobs, which share one lane
// (padded P 2,163 MiB each, one lane of 8,366 MiB: three fit, see
// TestSharingGolden), so that they take turns. Their demand is 0.6: the
// job that runs goes at full speed.
func TestLanePolicyGolden(t *testing.T) {
	cases := []struct {
		name   string
		jobs   []trace.Job
		jct    map[lanes.Policy]map[int64]float64
		perGPU map[lanes.Policy]float64 // jobs per busy GPU
	}{
		{
			// pack and srtf (a tie: the job admitted first) run job 1
			// first. fair splits the lane: both end at 200.
			name: "two at once",
			jobs: []trace.Job{fj(1, 0, 600, 100), fj(2, 0, 600, 100)},
			jct: map[lanes.Policy]map[int64]float64{
				lanes.Pack: {1: 100, 2: 200},
				lanes.Fair: {1: 200, 2: 200},
				lanes.SRTF: {1: 100, 2: 200},
			},
			perGPU: map[lanes.Policy]float64{lanes.Pack: 300.0 / 200, lanes.Fair: 400.0 / 200, lanes.SRTF: 300.0 / 200},
		},
		{
			// Job 2 joins at 100 with 50 s of work, job 1 has 200 left.
			// pack: job 1 keeps the lane to 300, job 2 runs 300 to 350.
			// srtf: job 2 has less left and runs 100 to 150. fair: job 2
			// has no lane time yet and runs alone; it ends at 150, before
			// it catches up with job 1's 100 s.
			name: "a short job joins a long one",
			jobs: []trace.Job{fj(1, 0, 600, 300), fj(2, 100, 600, 50)},
			jct: map[lanes.Policy]map[int64]float64{
				lanes.Pack: {1: 300, 2: 250},
				lanes.Fair: {1: 350, 2: 50},
				lanes.SRTF: {1: 350, 2: 50},
			},
			perGPU: map[lanes.Policy]float64{lanes.Pack: 550.0 / 350, lanes.Fair: 400.0 / 350, lanes.SRTF: 400.0 / 350},
		},
		{
			// Job 2 joins at 100 with 200 s of work, as much as job 1 has
			// left. pack and srtf (a tie) keep job 1 on to 300; job 2
			// runs 300 to 500. fair: job 2 runs alone 100 to 200, when it
			// has 100 s of lane time like job 1; then they take turns,
			// each at half speed, and job 2 ends at 400 (100 + 200 x 1/2
			// = 200 done), job 1 has 200 done then and ends at 500.
			name: "a job joins with as much work left",
			jobs: []trace.Job{fj(1, 0, 600, 300), fj(2, 100, 600, 200)},
			jct: map[lanes.Policy]map[int64]float64{
				lanes.Pack: {1: 300, 2: 400},
				lanes.Fair: {1: 500, 2: 300},
				lanes.SRTF: {1: 300, 2: 400},
			},
			perGPU: map[lanes.Policy]float64{lanes.Pack: 700.0 / 500, lanes.Fair: 800.0 / 500, lanes.SRTF: 700.0 / 500},
		},
		{
			// Three jobs in one lane. pack: 1 (0-300), 2 (300-400), 3
			// (400-500). srtf: at 100 job 2 (100 left) passes job 1 (200);
			// at 150 job 2 has 50 left, job 3 100: job 2 runs to 200, job
			// 3 to 300, job 1 to 500. fair: job 1 has 100 s of lane time
			// at 100; job 2 runs alone from 100; at 150 job 3 (none)
			// runs alone until it has job 2's 50 s, at 200; jobs 2 and 3
			// then take turns and reach job 1's 100 s at 300, when both
			// have done their 100 s of work; job 1 ends at 500.
			name: "three jobs, fair catches up twice",
			jobs: []trace.Job{fj(1, 0, 600, 300), fj(2, 100, 600, 100), fj(3, 150, 600, 100)},
			jct: map[lanes.Policy]map[int64]float64{
				lanes.Pack: {1: 300, 2: 300, 3: 350},
				lanes.Fair: {1: 500, 2: 200, 3: 150},
				lanes.SRTF: {1: 500, 2: 100, 3: 150},
			},
			perGPU: map[lanes.Policy]float64{lanes.Pack: 950.0 / 500, lanes.Fair: 850.0 / 500, lanes.SRTF: 750.0 / 500},
		},
	}
	for _, c := range cases {
		for _, lp := range lanes.Policies() {
			t.Run(c.name+"/"+string(lp), func(t *testing.T) {
				for _, pol := range []string{"fjf", "tiresias-l"} {
					cfg := Config{Sched: sched.Config{Policy: pol}, Sharing: salussim.SharingSalus, LanePolicy: lp}
					r, jct := run(t, c.jobs, "1x1x16", cfg)
					for id, want := range c.jct[lp] {
						if math.Abs(jct[id]-want) > 1e-6 {
							t.Errorf("%s: job %d JCT %v, want %v", pol, id, jct[id], want)
						}
					}
					if math.Abs(r.GPUUtilization-1) > 1e-9 || math.Abs(r.JobsPerBusyGPU-c.perGPU[lp]) > 1e-9 || r.CoLocations != len(c.jobs)-1 {
						t.Errorf("%s: util %v, jobs per busy GPU %v, co-locations %d; want 1, %v, %d",
							pol, r.GPUUtilization, r.JobsPerBusyGPU, r.CoLocations, c.perGPU[lp], len(c.jobs)-1)
					}
				}
			})
		}
	}
}

// TestLanePolicyDefaultAndRefused: no lane policy is pack, the agent's
// default; an unknown one is refused.
func TestLanePolicyDefaultAndRefused(t *testing.T) {
	jobs := []trace.Job{fj(1, 0, 600, 300), fj(2, 100, 600, 50)}
	r, jct := run(t, jobs, "1x1x16", Config{Sched: sched.Config{Policy: "fjf"}, Sharing: salussim.SharingSalus})
	if r.LanePolicy != string(lanes.Pack) || jct[2] != 250 {
		t.Errorf("default: lane policy %q, job 2 JCT %v; want pack, 250", r.LanePolicy, jct[2])
	}
	nodes, _ := trace.ParseClusterSpec("1x1x16")
	cfg := Config{Sched: sched.Config{Policy: "fjf"}, Nodes: nodes, Sharing: salussim.SharingSalus, LanePolicy: "lifo"}
	if _, err := Run(context.Background(), jobs, cfg); err == nil {
		t.Error("lane policy lifo: no error")
	}
}
