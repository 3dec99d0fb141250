package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// MixedConfig shapes a mixed stream (Mixed): a steady stream of 1-GPU jobs
// loading a small cluster, and a big job at a fixed interval, the case in
// which big jobs starve without reservations (docs/scheduling.md,
// "Reservations"). Times are seconds.
type MixedConfig struct {
	// Seed fixes every draw: the same config gives the same jobs.
	Seed uint64
	// LengthS is how long jobs arrive.
	LengthS float64
	// GPUs is the cluster the load refers to.
	GPUs int
	// SmallLoad is the share of the GPUs the 1-GPU jobs keep busy on
	// average: Poisson arrivals at the rate that gives it.
	SmallLoad float64
	// SmallMinS and SmallMaxS bound the 1-GPU jobs' durations, drawn
	// log-uniformly between them.
	SmallMinS, SmallMaxS float64
	// LimitShare is the share of the 1-GPU jobs that declare a time limit,
	// of their duration times a factor drawn uniformly from 1.5 to 3, in
	// whole minutes.
	LimitShare float64
	// BigGPUs jobs arrive every BigEveryS (the first at BigEveryS/2),
	// each lasting from BigMinS to BigMaxS, uniformly.
	BigGPUs          int
	BigEveryS        float64
	BigMinS, BigMaxS float64
	// Sessions (class "session", 1 GPU, never preempted) arrive every
	// SessionEveryS on average (Poisson; 0: none), each used from
	// SessionMinS to SessionMaxS, log-uniformly, in whole minutes, with a
	// time limit of SessionLimitS (its team's session policy; 0: none).
	SessionEveryS, SessionMinS, SessionMaxS, SessionLimitS float64
}

// DefaultMixed is the stream of testdata/traces/mixed-8gpu.csv: 1-GPU jobs
// of 30 s to 10 minutes at a load of 0.74 on 8 GPUs, half of them with a
// time limit, and an 8-GPU job of 2 to 5 minutes every 30 minutes (a load
// of 0.12 more, 0.86 in all), for a day. The 8-GPU jobs stay below
// tiresias-l's first threshold (3,250 GPU-s, 6.8 minutes on 8 GPUs), even
// stretched by 1.25 (Jittered): see docs/scheduling.md, "Reservations",
// for the big jobs that pass it.
var DefaultMixed = MixedConfig{
	Seed: 30, LengthS: 86400, GPUs: 8,
	SmallLoad: 0.74, SmallMinS: 30, SmallMaxS: 600, LimitShare: 0.5,
	BigGPUs: 8, BigEveryS: 1800, BigMinS: 120, BigMaxS: 300,
}

// SpecMixed is the stream of issue 30's proof, testdata/traces/mixed-spec.csv:
// 1-GPU jobs as DefaultMixed's but at a load of 0.85 on 8 GPUs, an 8-GPU
// job of 1 to 2 minutes every 30 minutes (0.05 more), and a session about
// every 20 minutes of 5 to 15 minutes under a team session limit of 15
// minutes (0.06 more; 0.96 in all), for a day. A session's limit is the
// reservation bound the trace is replayed with (900 s): see
// docs/scheduling.md, "Reservations", for why the bound must cover it.
var SpecMixed = MixedConfig{
	Seed: 30, LengthS: 86400, GPUs: 8,
	SmallLoad: 0.85, SmallMinS: 30, SmallMaxS: 600, LimitShare: 0.5,
	BigGPUs: 8, BigEveryS: 1800, BigMinS: 60, BigMaxS: 120,
	SessionEveryS: 1200, SessionMinS: 300, SessionMaxS: 900, SessionLimitS: 900,
}

// Mixed draws the jobs of a mixed stream, in submit order, IDs from 1.
// Times are whole seconds.
func Mixed(cfg MixedConfig) ([]Job, error) {
	switch {
	case !(cfg.LengthS > 0) || math.IsInf(cfg.LengthS, 1):
		return nil, fmt.Errorf("mixed trace: length %v s: want a positive number of seconds", cfg.LengthS)
	case cfg.GPUs < 1 || cfg.BigGPUs < 0 || cfg.BigGPUs > cfg.GPUs:
		return nil, fmt.Errorf("mixed trace: %d GPUs, big jobs of %d: want 1 GPU or more, big jobs of at most as many", cfg.GPUs, cfg.BigGPUs)
	case !(cfg.SmallLoad > 0 && cfg.SmallLoad < 1):
		return nil, fmt.Errorf("mixed trace: load %v: want a share of the GPUs in (0, 1)", cfg.SmallLoad)
	case !(cfg.SmallMinS > 0 && cfg.SmallMaxS >= cfg.SmallMinS) || math.IsInf(cfg.SmallMaxS, 1):
		return nil, fmt.Errorf("mixed trace: 1-GPU durations %v to %v s: want 0 < min <= max", cfg.SmallMinS, cfg.SmallMaxS)
	case !(cfg.LimitShare >= 0 && cfg.LimitShare <= 1):
		return nil, fmt.Errorf("mixed trace: limit share %v: want 0 to 1", cfg.LimitShare)
	case cfg.SessionEveryS < 0 || cfg.SessionEveryS > 0 && (!(cfg.SessionMinS > 0 && cfg.SessionMaxS >= cfg.SessionMinS) || math.IsInf(cfg.SessionMaxS, 1) || !(cfg.SessionLimitS >= 0)):
		return nil, fmt.Errorf("mixed trace: sessions every %v s of %v to %v s, limit %v s: want positive times, min <= max, a limit of 0 or more", cfg.SessionEveryS, cfg.SessionMinS, cfg.SessionMaxS, cfg.SessionLimitS)
	case cfg.BigGPUs > 0 && (!(cfg.BigEveryS > 0) || !(cfg.BigMinS > 0 && cfg.BigMaxS >= cfg.BigMinS) || math.IsInf(cfg.BigMaxS, 1)):
		return nil, fmt.Errorf("mixed trace: big jobs every %v s of %v to %v s: want positive times, min <= max", cfg.BigEveryS, cfg.BigMinS, cfg.BigMaxS)
	}
	r := rand.New(rand.NewPCG(cfg.Seed, 0x6d697865))
	// The mean of a log-uniform duration from a to b: (b-a)/ln(b/a).
	mean := cfg.SmallMinS
	if cfg.SmallMaxS > cfg.SmallMinS {
		mean = (cfg.SmallMaxS - cfg.SmallMinS) / math.Log(cfg.SmallMaxS/cfg.SmallMinS)
	}
	rate := cfg.SmallLoad * float64(cfg.GPUs) / mean // 1-GPU jobs per second
	var jobs []Job
	for t := r.ExpFloat64() / rate; t < cfg.LengthS; t += r.ExpFloat64() / rate {
		d := math.Round(cfg.SmallMinS * math.Pow(cfg.SmallMaxS/cfg.SmallMinS, r.Float64()))
		j := Job{Submit: math.Round(t), Duration: max(d, 1), GPUs: 1, GPUMilli: 1000, Model: "resnet50"}
		if r.Float64() < cfg.LimitShare {
			j.TimeLimitS = 60 * math.Ceil(j.Duration*(1.5+1.5*r.Float64())/60)
		}
		jobs = append(jobs, j)
	}
	if cfg.BigGPUs > 0 {
		for t := cfg.BigEveryS / 2; t < cfg.LengthS; t += cfg.BigEveryS {
			d := math.Round(cfg.BigMinS + (cfg.BigMaxS-cfg.BigMinS)*r.Float64())
			jobs = append(jobs, Job{Submit: math.Round(t), Duration: d, GPUs: cfg.BigGPUs, GPUMilli: 1000, Model: "resnet50"})
		}
	}
	if cfg.SessionEveryS > 0 {
		for t := r.ExpFloat64() * cfg.SessionEveryS; t < cfg.LengthS; t += r.ExpFloat64() * cfg.SessionEveryS {
			d := 60 * math.Round(cfg.SessionMinS*math.Pow(cfg.SessionMaxS/cfg.SessionMinS, r.Float64())/60)
			d = min(max(d, cfg.SessionMinS), cfg.SessionMaxS)
			j := Job{Submit: math.Round(t), Duration: max(d, 1), GPUs: 1, GPUMilli: 1000, Class: "session"}
			if cfg.SessionLimitS > 0 {
				j.TimeLimitS = max(cfg.SessionLimitS, j.Duration)
			}
			jobs = append(jobs, j)
		}
	}
	slices.SortStableFunc(jobs, func(a, b Job) int {
		switch {
		case a.Submit < b.Submit:
			return -1
		case a.Submit > b.Submit:
			return 1
		}
		return 0
	})
	for i := range jobs {
		jobs[i].ID = int64(i + 1)
	}
	return jobs, nil
}

// Jittered returns a copy of jobs with every submit time moved by up to
// shiftS either way and every duration (and time limit, so that it still
// bounds the duration) scaled by a factor from 1/scale to scale,
// log-uniformly, all drawn from seed; times stay whole seconds, submit
// times at 0 or later, durations at 1 s or more. It keeps IDs, GPUs and
// the rest: a copy of a trace as it might have come out another day.
func Jittered(jobs []Job, seed uint64, shiftS, scale float64) []Job {
	r := rand.New(rand.NewPCG(seed, 0x6a6974))
	out := slices.Clone(jobs)
	for i := range out {
		j := &out[i]
		j.Submit = max(0, math.Round(j.Submit+shiftS*(2*r.Float64()-1)))
		f := math.Pow(scale, 2*r.Float64()-1)
		j.Duration = max(1, math.Round(j.Duration*f))
		if j.TimeLimitS > 0 {
			j.TimeLimitS = max(j.Duration, math.Round(j.TimeLimitS*f))
		}
	}
	return out
}
