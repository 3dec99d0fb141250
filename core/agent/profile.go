package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// ProgressPrefix starts the progress line a job may print on its standard
// output or error so that the agent can measure its iteration rate:
//
//	GPUPORTAL_PROGRESS iter=N
//
// N is the number of iterations (steps, batches) the job has finished so
// far in this run, counting up. Other key=value fields after it are
// ignored; the line must be whole (ending in a newline) and at most
// maxProgressLine bytes. A job that opts in to the Salus gate need not
// print it: the gate counts its iterations.
const ProgressPrefix = "GPUPORTAL_PROGRESS"

// maxProgressLine bounds a line kept while waiting for its newline.
const maxProgressLine = 4096

// IterationSource reports how many iterations a job has finished; ok is
// false until it has reported any.
type IterationSource interface {
	Iterations() (n int64, ok bool)
}

// ProgressCounter is an io.Writer that watches a job's output for
// progress lines (ProgressPrefix) and keeps the last iteration count. Put
// it beside the log file with io.MultiWriter. It is safe for concurrent
// use.
type ProgressCounter struct {
	mu      sync.Mutex
	partial []byte
	discard bool // the current line grew too long: skip to its end
	iter    int64
	seen    bool
}

// Write scans p for progress lines; it never fails.
func (c *ProgressCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data := p
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if !c.discard && len(c.partial)+len(data) <= maxProgressLine {
				c.partial = append(c.partial, data...)
			} else {
				c.partial, c.discard = c.partial[:0], true // too long to be a progress line
			}
			break
		}
		line := data[:i]
		if len(c.partial) > 0 {
			line = append(c.partial, line...)
			c.partial = c.partial[:0]
		}
		if !c.discard {
			c.parse(string(line))
		}
		c.discard = false
		data = data[i+1:]
	}
	return len(p), nil
}

// parse reads one line; anything not a well-formed progress line is
// ignored.
func (c *ProgressCounter) parse(line string) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), ProgressPrefix)
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return
	}
	for _, f := range strings.Fields(rest) {
		if v, ok := strings.CutPrefix(f, "iter="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
				c.iter, c.seen = n, true
			}
			return
		}
	}
}

// Iterations is the last count a progress line gave.
func (c *ProgressCounter) Iterations() (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.iter, c.seen
}

// FirstIterations is an IterationSource over several (the Salus gate's
// count and the progress lines): the profiler takes the job's rate from
// whichever reports, the earliest in Sources when several do at once.
// Once one has reported it is the only one read, so that the counts of
// different sources never mix in one rate. It is safe for concurrent use.
type FirstIterations struct {
	Sources []IterationSource
	mu      sync.Mutex
	chosen  IterationSource
}

// Iterations is the count of the chosen source; ok is false while none
// has reported.
func (f *FirstIterations) Iterations() (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.chosen != nil {
		return f.chosen.Iterations()
	}
	for _, s := range f.Sources {
		if n, ok := s.Iterations(); ok {
			f.chosen = s
			return n, true
		}
	}
	return 0, false
}

// IterationFunc adapts a function, such as a job's count at the gate, to
// an IterationSource.
type IterationFunc func() (int64, bool)

// Iterations calls f.
func (f IterationFunc) Iterations() (int64, bool) { return f() }

// CPULimiter sets a job's CPU quota; *JobCgroup is one.
type CPULimiter interface {
	SetCPU(milli int64) error
}

// ProfileConfig says how to profile a job's CPU sensitivity.
type ProfileConfig struct {
	// PropMilli is the job's proportional share of CPU: no step goes below
	// it, so profiling never slows the job below what it would get anyway.
	PropMilli int64
	// MaxMilli is the most CPU the node can lend the job while profiling
	// (its share plus idle cores); at least PropMilli.
	MaxMilli int64
	// Steps is how many quotas are tried, evenly from PropMilli to
	// MaxMilli; default 4.
	Steps int
	// Warmup is waited after each change of quota before measuring, for
	// data loader queues to settle; default 5 s.
	Warmup time.Duration
	// Window is how long each step is measured; default 20 s.
	Window time.Duration
}

func (c ProfileConfig) withDefaults() ProfileConfig {
	if c.Steps <= 0 {
		c.Steps = 4
	}
	if c.Warmup <= 0 {
		c.Warmup = 5 * time.Second
	}
	if c.Window <= 0 {
		c.Window = 20 * time.Second
	}
	return c
}

// Duration is how long profiling takes: Steps x (Warmup + Window), 100 s
// with the defaults.
func (c ProfileConfig) Duration() time.Duration {
	c = c.withDefaults()
	return time.Duration(c.Steps) * (c.Warmup + c.Window)
}

// CPUProfile is a measured profile, quotas ascending
// (synergy.MeasuredCurve turns it into a curve).
type CPUProfile struct {
	Points []job.ProfilePoint
	// Elapsed is how long profiling took.
	Elapsed time.Duration
}

// ErrNoProgress is returned by ProfileCPU when the job reports no
// iterations during a step: it prints no progress lines, or is stuck.
var ErrNoProgress = errors.New("job reported no progress")

// ProfileCPU measures a job's iteration rate at cfg.Steps CPU quotas from
// its proportional share up to cfg.MaxMilli, through lim (its cgroup) and
// src (its progress lines or the gate), and leaves its quota at the
// proportional share. It is the profiling phase of docs/synergy.md: the
// job runs all along, never below its share, for cfg.Duration().
func ProfileCPU(ctx context.Context, lim CPULimiter, src IterationSource, cfg ProfileConfig) (CPUProfile, error) {
	cfg = cfg.withDefaults()
	if cfg.PropMilli <= 0 {
		return CPUProfile{}, fmt.Errorf("profile cpu: proportional share %d milli must be positive", cfg.PropMilli)
	}
	cfg.MaxMilli = max(cfg.MaxMilli, cfg.PropMilli)
	began := time.Now()
	var prof CPUProfile
	defer func() { _ = lim.SetCPU(cfg.PropMilli) }()
	for i := range cfg.Steps {
		q := cfg.PropMilli
		if cfg.Steps > 1 {
			q += (cfg.MaxMilli - cfg.PropMilli) * int64(i) / int64(cfg.Steps-1)
		}
		if i > 0 && q == prof.Points[len(prof.Points)-1].CPUMilli {
			continue
		}
		if err := lim.SetCPU(q); err != nil {
			return prof, fmt.Errorf("profile cpu: step %d: %w", i, err)
		}
		if err := sleepCtx(ctx, cfg.Warmup); err != nil {
			return prof, fmt.Errorf("profile cpu: %w", err)
		}
		n0, ok0 := src.Iterations()
		t0 := time.Now()
		if err := sleepCtx(ctx, cfg.Window); err != nil {
			return prof, fmt.Errorf("profile cpu: %w", err)
		}
		n1, ok1 := src.Iterations()
		dt := time.Since(t0).Seconds()
		if !ok0 || !ok1 || n1 <= n0 {
			return prof, fmt.Errorf("profile cpu: step %d at %d milli: %w", i, q, ErrNoProgress)
		}
		prof.Points = append(prof.Points, job.ProfilePoint{CPUMilli: q, Rate: float64(n1-n0) / dt})
	}
	prof.Elapsed = time.Since(began)
	return prof, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
