package salussim

import (
	"fmt"
	"testing"

	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
)

// BenchmarkOpenB runs the openb trace's last six weeks (6,183 jobs, 2,566
// of them fractional) at 24 and 32 GPUs without sharing and with Salus
// lanes under each policy, plus two variants (no padding; a 20% slowdown
// for sharing), and reports the figures as metrics. docs/salus.md's
// table comes from:
//
//	go test -run '^$' -bench OpenB -benchtime 1x ./core/salussim
func BenchmarkOpenB(b *testing.B) {
	jobs := openbLast6w(b)
	type variant struct {
		name string
		cfg  Config
	}
	variants := []variant{{"none", Config{Sharing: SharingNone}}}
	for _, pol := range lanes.Policies() {
		variants = append(variants, variant{"salus-" + string(pol), Config{Sharing: SharingSalus, Lanes: lanes.Config{Policy: pol}}})
	}
	variants = append(variants,
		variant{"salus-srtf-nopad", Config{Sharing: SharingSalus, Lanes: lanes.Config{Policy: lanes.SRTF, Padding: memest.NoPadding}}},
		variant{"salus-srtf-slow20", Config{Sharing: SharingSalus, Lanes: lanes.Config{Policy: lanes.SRTF}, ShareSlowdown: 0.2}},
	)
	for _, gpus := range []int{24, 32} {
		for _, v := range variants {
			cfg := v.cfg
			cfg.GPUs = gpus
			b.Run(fmt.Sprintf("gpus=%d/%s", gpus, v.name), func(b *testing.B) {
				var r *Result
				for b.Loop() {
					var err error
					if r, err = Run(jobs, cfg); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(r.AvgJCTS, "avg_jct_s")
				b.ReportMetric(r.AvgJCTFractionalS, "frac_jct_s")
				b.ReportMetric(r.AvgJCTWholeS, "whole_jct_s")
				b.ReportMetric(r.P95JCTS, "p95_jct_s")
				b.ReportMetric(r.AvgStretch, "frac_stretch")
				b.ReportMetric(r.GPUUtilization, "gpu_util")
				b.ReportMetric(r.ComputeUtilization, "compute_util")
				b.ReportMetric(r.MakespanS, "makespan_s")
				b.ReportMetric(r.JobsPerBusyGPU, "jobs_per_busy_gpu")
				b.ReportMetric(float64(r.Merges), "merges")
				b.ReportMetric(float64(r.Spreads), "spreads")
			})
		}
	}
}
