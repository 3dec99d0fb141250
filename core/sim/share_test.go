package sim

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/salussim"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

// fj builds a fractional trace job: id, submit, gpu_milli, duration.
func fj(id int64, submit float64, milli int, dur float64) trace.Job {
	return trace.Job{ID: id, Submit: submit, GPUs: 1, Duration: dur, GPUMilli: milli}
}

// TestSharingGolden checks tiny scenarios worked out by hand, with srtf
// lanes (TestLanePolicyGolden has the others), on GPUs of
// 16 GiB (16,384 MiB). Memory is gpu_milli/1,000 of it, 20% persistent,
// padded (P x 1.1, then the total x 1.05, rounded up):
//
//   - 250 milli: 4,096 MiB, P 819 E 3,277, padded P 901 E 3,486 (4,387);
//   - 600 milli: 9,830 MiB, P 1,966 E 7,864, padded P 2,163 E 8,366
//     (10,529);
//   - 990 milli: padded above 16,384 MiB: runs alone.
func TestSharingGolden(t *testing.T) {
	cases := []struct {
		name    string
		jobs    []trace.Job
		cluster string
		sharing salussim.Sharing
		jct     map[int64]float64
		util    float64 // GPU utilization
		perGPU  float64 // jobs per busy GPU
		joins   int
	}{
		{
			// Two lanes (2 x 4,387 fits), demand 0.5: both at full speed.
			name: "two small jobs run side by side", cluster: "1x1x16", sharing: salussim.SharingSalus,
			jobs: []trace.Job{fj(1, 0, 250, 100), fj(2, 0, 250, 100)},
			jct:  map[int64]float64{1: 100, 2: 100}, util: 1, perGPU: 2, joins: 1,
		},
		{
			name: "without sharing they take turns", cluster: "1x1x16", sharing: salussim.SharingNone,
			jobs: []trace.Job{fj(1, 0, 250, 100), fj(2, 0, 250, 100)},
			jct:  map[int64]float64{1: 100, 2: 200}, util: 1, perGPU: 1,
		},
		{
			// A second lane of 10,529 does not fit beside the first;
			// joining it needs 2,163 more: one lane, in turns. With as
			// much work left each, the job admitted first runs first;
			// job 2 holds its memory from 0 and runs 100 to 200.
			name: "two large jobs share one lane", cluster: "1x1x16", sharing: salussim.SharingSalus,
			jobs: []trace.Job{fj(1, 0, 600, 100), fj(2, 0, 600, 100)},
			jct:  map[int64]float64{1: 100, 2: 200}, util: 1, perGPU: 300.0 / 200, joins: 1,
		},
		{
			// At 50 job 1 has 50 s left, job 2 100: job 1 goes on.
			name: "srtf: the job with less left keeps the lane", cluster: "1x1x16", sharing: salussim.SharingSalus,
			jobs: []trace.Job{fj(1, 0, 600, 100), fj(2, 50, 600, 100)},
			jct:  map[int64]float64{1: 100, 2: 150}, util: 1, perGPU: 250.0 / 200, joins: 1,
		},
		{
			// At 100 job 1 has 200 s left, job 2 50: job 2 runs 100 to
			// 150, then job 1 its last 200 s.
			name: "srtf: a shorter job that joins runs first", cluster: "1x1x16", sharing: salussim.SharingSalus,
			jobs: []trace.Job{fj(1, 0, 600, 300), fj(2, 100, 600, 50)},
			jct:  map[int64]float64{1: 350, 2: 50}, util: 1, perGPU: 400.0 / 350, joins: 1,
		},
		{
			// Job 1 takes GPU 0 and job 3 joins it; the whole job 2 gets
			// GPU 1 at once. Without sharing, job 3 waits for job 2.
			name: "whole jobs keep the empty GPU", cluster: "1x2x16", sharing: salussim.SharingSalus,
			jobs: []trace.Job{fj(1, 0, 250, 100), gj(2, 1, 1, 50), fj(3, 2, 250, 100)},
			jct:  map[int64]float64{1: 100, 2: 50, 3: 100}, util: 152.0 / 204, perGPU: 250.0 / 152, joins: 1,
		},
		{
			name: "whole jobs without sharing", cluster: "1x2x16", sharing: salussim.SharingNone,
			jobs: []trace.Job{fj(1, 0, 250, 100), gj(2, 1, 1, 50), fj(3, 2, 250, 100)},
			jct:  map[int64]float64{1: 100, 2: 50, 3: 149}, util: 250.0 / 302, perGPU: 1,
		},
		{
			// 990 milli is too large once padded: it runs alone, and the
			// small job waits for it.
			name: "a job too large once padded runs alone", cluster: "1x1x16", sharing: salussim.SharingSalus,
			jobs: []trace.Job{fj(1, 0, 990, 100), fj(2, 0, 250, 100)},
			jct:  map[int64]float64{1: 100, 2: 200}, util: 1, perGPU: 1,
		},
		{
			// A GPU of unknown memory counts as 16 GiB.
			name: "unknown GPU memory is 16 GiB", cluster: "1x1", sharing: salussim.SharingSalus,
			jobs: []trace.Job{fj(1, 0, 250, 100), fj(2, 0, 250, 100)},
			jct:  map[int64]float64{1: 100, 2: 100}, util: 1, perGPU: 2, joins: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, pol := range []string{"fjf", "tiresias-l"} {
				r, jct := run(t, c.jobs, c.cluster, Config{Sched: sched.Config{Policy: pol}, Sharing: c.sharing, LanePolicy: lanes.SRTF})
				for id, want := range c.jct {
					if math.Abs(jct[id]-want) > 1e-6 {
						t.Errorf("%s: job %d JCT %v, want %v", pol, id, jct[id], want)
					}
				}
				if math.Abs(r.GPUUtilization-c.util) > 1e-9 || math.Abs(r.JobsPerBusyGPU-c.perGPU) > 1e-9 || r.CoLocations != c.joins {
					t.Errorf("%s: util %v, jobs per busy GPU %v, co-locations %d; want %v, %v, %d",
						pol, r.GPUUtilization, r.JobsPerBusyGPU, r.CoLocations, c.util, c.perGPU, c.joins)
				}
			}
		})
	}
}

// TestSharingRefused: an unknown mode, and salus in count mode, where
// the scheduler names no GPU.
func TestSharingRefused(t *testing.T) {
	nodes, _ := trace.ParseClusterSpec("1x2")
	jobs := []trace.Job{fj(1, 0, 250, 100)}
	if _, err := Run(context.Background(), jobs, Config{Sched: sched.Config{Policy: "fjf"}, Nodes: nodes, Sharing: "mps"}); err == nil {
		t.Error("sharing mps: no error")
	}
	_, err := Run(context.Background(), jobs, Config{Sched: sched.Config{Policy: "fjf", Placement: sched.PlaceCount}, Nodes: nodes, Sharing: salussim.SharingSalus})
	if err == nil {
		t.Error("salus in count mode: no error")
	}
}

// TestSharingWholeJobsUnchanged: with no fractional job, salus gives
// exactly what none gives.
func TestSharingWholeJobsUnchanged(t *testing.T) {
	jobs := []trace.Job{gj(1, 0, 2, 100), gj(2, 10, 1, 50), gj(3, 20, 4, 30), gj(4, 25, 1, 500)}
	for _, pol := range []string{"fjf", "srtf", "tiresias-l"} {
		a, ja := run(t, jobs, "2x2", Config{Sched: sched.Config{Policy: pol}})
		b, jb := run(t, jobs, "2x2", Config{Sched: sched.Config{Policy: pol}, Sharing: salussim.SharingSalus})
		if fmt.Sprint(ja) != fmt.Sprint(jb) || a.GPUUtilization != b.GPUUtilization || b.CoLocations != 0 || b.SharingJobs != 0 {
			t.Errorf("%s: none %v %v, salus %v %v (%d co-locations)", pol, ja, a.GPUUtilization, jb, b.GPUUtilization, b.CoLocations)
		}
	}
}

// openbLast6w reads openb-pods.csv and keeps its last 6,183 jobs, the
// six weeks core/salussim simulates, submit times from the first.
func openbLast6w(b testing.TB) []trace.Job {
	b.Helper()
	tr, err := trace.ReadFile(sharedTrace(b, "openb-pods.csv"), trace.FormatOpenB)
	if err != nil {
		b.Fatal(err)
	}
	const last6w = 6183
	jobs := append([]trace.Job(nil), tr.Jobs[len(tr.Jobs)-last6w:]...)
	first := jobs[0].Submit
	for i := range jobs {
		jobs[i].Submit -= first
	}
	return jobs
}

// BenchmarkOpenBSharing runs the openb trace's last six weeks at 24 and
// 32 GPUs (3x8 and 4x8 nodes of 16 GiB GPUs), without sharing and with
// Salus co-location under each lane policy (pack, fair, srtf) and each
// share placement (free-first, fullest-first), under fjf
// (core/salussim's cluster order) and tiresias-l, and reports the figures
// as metrics. docs/salus.md's tables come from:
//
//	go test -run '^$' -bench OpenBSharing -benchtime 1x ./core/sim
func BenchmarkOpenBSharing(b *testing.B) {
	jobs := openbLast6w(b)
	for _, cluster := range []string{"3x8x16", "4x8x16"} {
		nodes, err := trace.ParseClusterSpec(cluster)
		if err != nil {
			b.Fatal(err)
		}
		for _, pol := range []string{"fjf", "tiresias-l"} {
			type mode struct {
				sharing salussim.Sharing
				lane    lanes.Policy
				place   string
			}
			modes := []mode{{salussim.SharingNone, "", ""}}
			for _, lp := range lanes.Policies() {
				for _, place := range sched.SharePlacements() {
					modes = append(modes, mode{salussim.SharingSalus, lp, place})
				}
			}
			for _, m := range modes {
				name := fmt.Sprintf("%s/%s/%s", cluster, pol, m.sharing)
				if m.lane != "" {
					name += "-" + string(m.lane) + "-" + m.place
				}
				b.Run(name, func(b *testing.B) {
					var r *Result
					cfg := Config{Sched: sched.Config{Policy: pol, OmitWaits: true, SharePlacement: m.place},
						Nodes: nodes, Sharing: m.sharing, LanePolicy: m.lane}
					for b.Loop() {
						r, err = Run(context.Background(), jobs, cfg)
						if err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(r.AvgJCT, "avg-jct-s")
					b.ReportMetric(r.P95JCT, "p95-jct-s")
					b.ReportMetric(r.GPUUtilization, "gpu-util")
					b.ReportMetric(r.JobsPerBusyGPU, "jobs/busy-gpu")
					b.ReportMetric(float64(r.CoLocations), "co-locations")
					b.ReportMetric(r.Makespan, "makespan-s")
					b.ReportMetric(float64(r.Finished), "finished")
				})
			}
		}
	}
}
