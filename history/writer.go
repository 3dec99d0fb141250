// Package history writes the GPU and cluster history into the store: the
// machines' GPU readings, downsampled to one row per GPU and minute, and
// the jobs by state each minute; it closes accounting days, rolls minutes
// up into hours and prunes what is past keeping. The server assembly
// starts one Writer; the web server only reads what it wrote.
package history

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuportal/gpuportal/accountingstore"
	"github.com/gpuportal/gpuportal/core/accounting"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/models"
)

// Store is what the writer reads and writes; *models.Store is one.
type Store interface {
	SaveGPUHistory(ctx context.Context, rows []models.GPUHistory) error
	CountJobsByState(ctx context.Context) (map[job.State]int, error)
	SaveClusterHistory(ctx context.Context, h models.ClusterHistory) error
	accountingstore.Closer
	RollupGPUHistory(ctx context.Context, before int64) (int, error)
	PruneHistory(ctx context.Context, before int64) (int64, error)
}

// Telemetry is where the machines' readings come from;
// *telemetry.Recorder is one.
type Telemetry interface {
	Feed(n int) (*telemetry.Feed, func())
}

// Nodes are the machines connected now, whose GPUs' UUIDs name the rows;
// *engine.Engine is one.
type Nodes interface {
	Nodes() []engine.Node
}

// Config is what a Writer works with, and how long it keeps history.
type Config struct {
	Store     Store
	Telemetry Telemetry
	Nodes     Nodes
	Logger    *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Leader reports whether this replica maintains the history (closes
	// accounting days, rolls up, prunes) for all; nil: it always does.
	Leader func() bool
	// IdleBelowPct is the GPU utilization, in percent, under which an
	// allocated GPU counts idle in a closed accounting day; 0:
	// accounting.DefaultIdleBelowPct.
	IdleBelowPct float64
	// Raw is how long minute rows are kept before they are rolled up
	// into hours (default 7 days).
	Raw time.Duration
	// Keep is how long any history is kept (default 90 days).
	Keep time.Duration
	// Every is how often roll-up and pruning run (default 10 minutes).
	Every time.Duration
}

// Writer writes the history until its Run ends.
type Writer struct {
	cfg Config
	// dropped counts the machine reports dropped for falling behind.
	dropped atomic.Int64
}

// New returns a Writer over cfg, with its defaults filled in.
func New(cfg Config) *Writer {
	if cfg.Raw <= 0 {
		cfg.Raw = 7 * 24 * time.Hour
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 90 * 24 * time.Hour
	}
	if cfg.Keep < cfg.Raw {
		cfg.Keep = cfg.Raw
	}
	if cfg.Every <= 0 {
		cfg.Every = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.IdleBelowPct <= 0 {
		cfg.IdleBelowPct = accounting.DefaultIdleBelowPct
	}
	return &Writer{cfg: cfg}
}

// Collectors are what /metrics says of the writer: the machine reports it
// dropped for falling behind.
func (w *Writer) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gpuportal_history_reports_dropped_total",
			Help: "Machine reports the GPU history writer dropped: it fell ten minutes of reports behind."},
			func() float64 { return float64(w.dropped.Load()) }),
	}
}

// Run writes the GPU samples, downsampled to one row per GPU and minute,
// and the jobs by state each minute, to the database until ctx ends; it
// rolls minutes older than Config.Raw up into hours and deletes history
// older than Config.Keep. Frames are folded in as they come; the
// database is written by a second goroutine, so that a slow write or a
// long roll-up makes no frame miss.
func (w *Writer) Run(ctx context.Context) {
	feed, cancel := w.cfg.Telemetry.Feed(feedMax)
	defer cancel()
	closed := make(chan []telemetry.Aggregate, 16)
	saved := make(chan struct{})
	go func() {
		defer close(saved)
		w.save(ctx, closed)
	}()
	d := telemetry.NewDownsampler(models.StepMinute)
	var held []telemetry.Aggregate // closed, not yet handed to the writer
	for {
		var out chan<- []telemetry.Aggregate
		if len(held) > 0 {
			out = closed
		}
		select {
		case <-ctx.Done():
			// Keep the minute in progress: a restart merges into it.
			frames, _ := feed.Take()
			for _, f := range frames {
				held = append(held, d.AddFrame(f)...)
			}
			closed <- append(held, d.Flush()...)
			close(closed)
			<-saved
			return
		case <-feed.Ready():
			// Every machine's report since the last pass, in one batch: the
			// minutes they close go to the database together.
			frames, dropped := feed.Take()
			if dropped > 0 {
				w.dropped.Add(dropped)
				w.cfg.Logger.Warn("GPU history fell behind the machines' reports", "frames_dropped", dropped)
			}
			for _, f := range frames {
				held = append(held, d.AddFrame(f)...)
			}
		case out <- held:
			held = nil
		}
	}
}

// feedMax is how many machine reports the writer may fall behind before
// it drops the oldest: ten minutes of 1,000 machines.
const feedMax = 600_000

// save writes closed minutes as they come, all that waits in one
// batch, and rolls up and prunes on a timer; once ctx ends it writes what
// is left and returns.
func (w *Writer) save(ctx context.Context, closed <-chan []telemetry.Aggregate) {
	tick := time.NewTicker(w.cfg.Every)
	defer tick.Stop()
	w.maintain(ctx)
	var counted int64 // the last minute whose job counts were saved
	for {
		select {
		case as, ok := <-closed:
			if !ok {
				return
			}
			as = drain(as, closed)
			if len(as) == 0 {
				continue
			}
			// A write under way finishes though ctx ends: the minutes it
			// holds are closed and would be lost.
			writeCtx, done := context.WithTimeout(context.WithoutCancel(ctx), writeWait)
			w.saveAggregates(writeCtx, as)
			done()
			if ctx.Err() != nil {
				continue
			}
			for _, m := range closedMinutes(as, counted) {
				w.saveJobCounts(ctx, m)
				counted = m
			}
		case <-tick.C:
			w.maintain(ctx)
		}
	}
}

// writeWait bounds one batch's write of GPU history.
const writeWait = 30 * time.Second

// drain appends to as whatever else waits in closed, without waiting.
func drain(as []telemetry.Aggregate, closed <-chan []telemetry.Aggregate) []telemetry.Aggregate {
	for {
		select {
		case more, ok := <-closed:
			if !ok {
				return as
			}
			as = append(as, more...)
		default:
			return as
		}
	}
}

// saveAggregates stores closed minutes under their GPUs' UUIDs. GPUs whose
// machine left before their minute closed have no UUID and are skipped.
func (w *Writer) saveAggregates(ctx context.Context, as []telemetry.Aggregate) {
	if len(as) == 0 {
		return
	}
	uuids := make(map[gpu.Ref]string)
	for _, n := range w.cfg.Nodes.Nodes() {
		for _, d := range n.Devices() {
			uuids[gpu.Ref{Node: n.Name(), Index: d.Index}] = d.UUID
		}
	}
	rows := make([]models.GPUHistory, 0, len(as))
	for _, a := range as {
		if id := uuids[a.GPU]; id != "" {
			rows = append(rows, models.HistoryFromAggregate(id, a))
		}
	}
	if err := w.cfg.Store.SaveGPUHistory(ctx, rows); err != nil {
		w.cfg.Logger.Warn("GPU history", "err", err)
	}
}

// saveJobCounts records the jobs waiting and running at the end of a minute.
func (w *Writer) saveJobCounts(ctx context.Context, minute int64) {
	counts, err := w.cfg.Store.CountJobsByState(ctx)
	if err != nil {
		w.cfg.Logger.Warn("cluster history", "err", err)
		return
	}
	h := models.ClusterHistory{Start: minute, Queued: counts[job.Queued], Running: counts[job.Running], Preempted: counts[job.Preempted]}
	if err := w.cfg.Store.SaveClusterHistory(ctx, h); err != nil {
		w.cfg.Logger.Warn("cluster history", "err", err)
	}
}

// accountingDaysPerPass bounds the days one maintenance pass closes: a
// server that starts with months of runs catches up over a few passes.
const accountingDaysPerPass = 31

// maintain closes accounting days, rolls up and prunes, on the leader.
func (w *Writer) maintain(ctx context.Context) {
	if w.cfg.Leader != nil && !w.cfg.Leader() {
		return // the leader maintains the history of all replicas
	}
	if err := w.Maintain(ctx, w.cfg.Now()); err != nil {
		w.cfg.Logger.Warn("GPU history maintenance", "err", err)
	}
}

// Maintain is one maintenance pass as of now: it closes the accounting
// of the days that ended, rolls minutes older than Config.Raw up into
// hours, and deletes history older than Config.Keep.
func (w *Writer) Maintain(ctx context.Context, now time.Time) error {
	// Close the accounting of the days that ended first, so that their
	// used GPU time is kept before their history goes.
	days, err := accountingstore.CloseDays(ctx, w.cfg.Store, now, w.cfg.IdleBelowPct/100, accountingDaysPerPass)
	if err != nil {
		return fmt.Errorf("close accounting days: %w", err)
	}
	if days > 0 {
		w.cfg.Logger.Debug("accounting", "days_closed", days)
	}
	n, err := w.cfg.Store.RollupGPUHistory(ctx, now.Add(-w.cfg.Raw).Unix())
	if err != nil {
		return err
	}
	pruned, err := w.cfg.Store.PruneHistory(ctx, now.Add(-w.cfg.Keep).Unix())
	if err != nil {
		return fmt.Errorf("after rolling up %d minutes: %w", n, err)
	}
	if n > 0 || pruned > 0 {
		w.cfg.Logger.Debug("GPU history", "minutes_rolled_up", n, "rows_pruned", pruned)
	}
	return nil
}

// closedMinutes is the distinct starts among as after the minute after,
// in order: each gets its row of job counts.
func closedMinutes(as []telemetry.Aggregate, after int64) []int64 {
	var out []int64
	for _, a := range as {
		if a.Start > after && !slices.Contains(out, a.Start) {
			out = append(out, a.Start)
		}
	}
	slices.Sort(out)
	return out
}
