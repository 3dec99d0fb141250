// Package live turns the machines' GPU readings into the frames of the
// live stream: machines report one at a time, and the publisher coalesces
// their readings per GPU (the latest of each) into one frame at most once
// an interval, so that each frame carries the latest reading of every
// machine that reported since the last, whatever the number of machines.
// The server assembly starts one Publisher; the web server takes its
// frames and sends each topic's followers what they may see of them.
package live

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/telemetry"
)

// DefaultInterval is the least time between two frames: about the
// live stream's documented rate of one update a second, but shorter than
// the second between a machine's readings. A frame then follows each
// second's readings: at exactly a second, the time each frame waits for
// the one before it added up, until one interval held two readings of
// every GPU and the frame kept only the later; the cluster page then
// drew that second from none of them, 16 GPUs busy where
// GET /cluster/history counted 100 (TestClusterChartsAgree).
const DefaultInterval = 900 * time.Millisecond

// feedMax is how many machine reports the publisher may fall behind
// before it drops the oldest: a minute of 1,000 machines.
const feedMax = 60_000

// Telemetry is where the machines' readings come from;
// *telemetry.Recorder is one.
type Telemetry interface {
	Feed(n int) (*telemetry.Feed, func())
}

// Config is what a Publisher works with.
type Config struct {
	Telemetry Telemetry
	// Interval is the least time between two frames; 0: DefaultInterval.
	Interval time.Duration
	Logger   *slog.Logger
}

// Frame is one frame of the live stream: the latest reading of each GPU
// that reported since the last frame, in the order of machine and GPU
// index, timed at its newest reading.
type Frame struct {
	telemetry.Frame
	// Seq numbers the frames from 1, for topics sent every nth frame.
	Seq int
}

// Oldest is the time of the oldest reading of f.
func (f Frame) Oldest() time.Time {
	t := f.T
	for _, g := range f.GPUs {
		t = min(t, g.T)
	}
	return time.Unix(t, 0)
}

// Publisher makes the frames until its Run ends.
type Publisher struct {
	cfg    Config
	frames chan Frame
	// dropped counts the machine reports dropped for falling behind.
	dropped atomic.Int64
}

// New returns a Publisher over cfg.
func New(cfg Config) *Publisher {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Publisher{cfg: cfg, frames: make(chan Frame)}
}

// Frames are the frames as Run makes them, for one reader: a frame waits
// for the reader to take it, while the readings that come meanwhile go
// into the next one.
func (p *Publisher) Frames() <-chan Frame { return p.frames }

// Collectors are what /metrics says of the publisher: the machine reports
// it dropped for falling behind.
func (p *Publisher) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gpuportal_live_reports_dropped_total",
			Help: "Machine reports the live stream dropped: it fell a minute of reports behind."},
			func() float64 { return float64(p.dropped.Load()) }),
	}
}

// Run makes frames of the machines' readings until ctx ends: at most one
// per Config.Interval, and none while no GPU reported.
func (p *Publisher) Run(ctx context.Context) {
	feed, cancel := p.cfg.Telemetry.Feed(feedMax)
	defer cancel()
	var (
		pending = make(map[gpu.Ref]telemetry.GPUFrame)
		last    time.Time // of the last frame
		due     <-chan time.Time
		seq     int
	)
	flush := func() bool {
		seq++
		last, due = time.Now(), nil
		f := Frame{Frame: coalesced(pending), Seq: seq}
		clear(pending)
		select {
		case p.frames <- f:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-feed.Ready():
			frames, dropped := feed.Take()
			if dropped > 0 {
				p.dropped.Add(dropped)
				p.cfg.Logger.Warn("live stream fell behind the machines' reports", "frames_dropped", dropped)
			}
			for _, f := range frames {
				for _, g := range f.GPUs {
					if cur, ok := pending[g.Ref]; !ok || g.T >= cur.T {
						pending[g.Ref] = g
					}
				}
			}
			if len(pending) == 0 || due != nil {
				continue
			}
			if wait := p.cfg.Interval - time.Since(last); wait > 0 {
				due = time.After(wait)
				continue
			}
			if !flush() {
				return
			}
		case <-due:
			if !flush() {
				return
			}
		}
	}
}

// coalesced is the latest reading of each GPU as one frame, in the order
// of machine and GPU index, timed at its newest reading.
func coalesced(byKey map[gpu.Ref]telemetry.GPUFrame) telemetry.Frame {
	f := telemetry.Frame{GPUs: make([]telemetry.GPUFrame, 0, len(byKey))}
	for _, g := range byKey {
		f.GPUs = append(f.GPUs, g)
		f.T = max(f.T, g.T)
	}
	slices.SortFunc(f.GPUs, func(a, b telemetry.GPUFrame) int {
		if c := strings.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return a.Index - b.Index
	})
	return f
}
