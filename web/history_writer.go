package web

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/models"
)

// HistoryConfig says how long GPU history is kept in the database.
type HistoryConfig struct {
	// Raw is how long minute rows are kept before they are rolled up
	// into hours (default 7 days).
	Raw time.Duration
	// Keep is how long any history is kept (default 90 days).
	Keep time.Duration
	// Every is how often roll-up and pruning run (default 10 minutes).
	Every time.Duration
}

func (h HistoryConfig) withDefaults() HistoryConfig {
	if h.Raw <= 0 {
		h.Raw = 7 * 24 * time.Hour
	}
	if h.Keep <= 0 {
		h.Keep = 90 * 24 * time.Hour
	}
	if h.Keep < h.Raw {
		h.Keep = h.Raw
	}
	if h.Every <= 0 {
		h.Every = 10 * time.Minute
	}
	return h
}

// RecordHistory writes the GPU samples, downsampled to one row per GPU
// and minute, and the jobs by state each minute, to the database until
// ctx ends; it rolls minutes older than cfg.Raw up into hours and deletes
// history older than cfg.Keep. Frames are folded in as they come; the
// database is written by a second goroutine, so that a slow write or a
// long roll-up makes no frame miss.
func (s *Server) RecordHistory(ctx context.Context, cfg HistoryConfig) {
	cfg = cfg.withDefaults()
	feed, cancel := s.cfg.Telemetry.Feed(historyFeedMax)
	defer cancel()
	closed := make(chan []telemetry.Aggregate, 16)
	saved := make(chan struct{})
	go func() {
		defer close(saved)
		s.saveHistory(ctx, cfg, closed)
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
				s.scale.historyDropped.Add(dropped)
				s.cfg.Logger.Warn("GPU history fell behind the machines' reports", "frames_dropped", dropped)
			}
			for _, f := range frames {
				held = append(held, d.AddFrame(f)...)
			}
		case out <- held:
			held = nil
		}
	}
}

// historyFeedMax is how many machine reports the history writer may fall
// behind before it drops the oldest: ten minutes of 1,000 machines.
const historyFeedMax = 600_000

// saveHistory writes closed minutes as they come, all that waits in one
// batch, and rolls up and prunes on a timer; once ctx ends it writes what
// is left and returns.
func (s *Server) saveHistory(ctx context.Context, cfg HistoryConfig, closed <-chan []telemetry.Aggregate) {
	tick := time.NewTicker(cfg.Every)
	defer tick.Stop()
	s.maintainHistory(ctx, cfg)
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
			writeCtx, done := context.WithTimeout(context.WithoutCancel(ctx), historyWriteWait)
			s.saveAggregates(writeCtx, as)
			done()
			if ctx.Err() != nil {
				continue
			}
			for _, m := range closedMinutes(as, counted) {
				s.saveJobCounts(ctx, m)
				counted = m
			}
		case <-tick.C:
			s.maintainHistory(ctx, cfg)
		}
	}
}

// historyWriteWait bounds one batch's write of GPU history.
const historyWriteWait = 30 * time.Second

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
func (s *Server) saveAggregates(ctx context.Context, as []telemetry.Aggregate) {
	if len(as) == 0 {
		return
	}
	uuids := make(map[telemetry.GPUKey]string)
	for _, g := range s.connectedGPUs() {
		uuids[g.Key] = g.Device.UUID
	}
	rows := make([]models.GPUHistory, 0, len(as))
	for _, a := range as {
		if id := uuids[a.GPU]; id != "" {
			rows = append(rows, models.HistoryFromAggregate(id, a))
		}
	}
	if err := s.cfg.Store.SaveGPUHistory(ctx, rows); err != nil {
		s.cfg.Logger.Warn("GPU history", "err", err)
	}
}

// saveJobCounts records the jobs waiting and running at the end of a minute.
func (s *Server) saveJobCounts(ctx context.Context, minute int64) {
	counts, err := s.cfg.Store.CountJobsByState(ctx)
	if err != nil {
		s.cfg.Logger.Warn("cluster history", "err", err)
		return
	}
	h := models.ClusterHistory{Start: minute, Queued: counts[job.Queued], Running: counts[job.Running], Preempted: counts[job.Preempted]}
	if err := s.cfg.Store.SaveClusterHistory(ctx, h); err != nil {
		s.cfg.Logger.Warn("cluster history", "err", err)
	}
}

// accountingDaysPerPass bounds the days one maintenance pass closes: a
// server that starts with months of runs catches up over a few passes.
const accountingDaysPerPass = 31

// maintainHistory closes accounting days, rolls up and prunes.
func (s *Server) maintainHistory(ctx context.Context, cfg HistoryConfig) {
	if !s.leading() {
		return // the leader maintains the history of all replicas (leader.go)
	}
	now := s.cfg.Now()
	if err := s.rollupAndPrune(ctx, now, cfg); err != nil {
		s.cfg.Logger.Warn("GPU history maintenance", "err", err)
	}
}

func (s *Server) rollupAndPrune(ctx context.Context, now time.Time, cfg HistoryConfig) error {
	// Close the accounting of the days that ended first, so that their
	// used GPU time is kept before their history goes.
	days, err := s.cfg.Store.CloseAccountingDays(ctx, now, s.idleBelowPct()/100, accountingDaysPerPass)
	if err != nil {
		return fmt.Errorf("close accounting days: %w", err)
	}
	if days > 0 {
		s.cfg.Logger.Debug("accounting", "days_closed", days)
	}
	n, err := s.cfg.Store.RollupGPUHistory(ctx, now.Add(-cfg.Raw).Unix())
	if err != nil {
		return err
	}
	pruned, err := s.cfg.Store.PruneHistory(ctx, now.Add(-cfg.Keep).Unix())
	if err != nil {
		return fmt.Errorf("after rolling up %d minutes: %w", n, err)
	}
	if n > 0 || pruned > 0 {
		s.cfg.Logger.Debug("GPU history", "minutes_rolled_up", n, "rows_pruned", pruned)
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
