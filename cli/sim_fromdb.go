package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/sim"
	"github.com/gpuportal/gpuportal/core/trace"
	"github.com/gpuportal/gpuportal/core/whatif"
	"github.com/gpuportal/gpuportal/models"
)

// simDBFlags are sim's flags for a what-if on the cluster's own history:
// `gpuportal sim --from-db` (docs/simulator.md, "What-if on the cluster's
// own history").
type simDBFlags struct {
	on         bool
	data, db   string
	days       int
	export     string
	maxJobs    int
	whatIfFlag map[string]bool // flags that only --from-db reads
}

func (f *simDBFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "from-db", false, "replay the cluster's own jobs, those finished in the last --days, from its database (--db or --data, as serve), beside what actually happened")
	fs.StringVar(&f.data, "data", "./data", "with --from-db: data folder of the SQLite database, as serve's")
	fs.StringVar(&f.db, "db", "", `with --from-db: database, "sqlite:PATH" or a "postgres://..." URL (default: SQLite in --data), as serve's`)
	fs.IntVar(&f.days, "days", 7, "with --from-db: replay the jobs finished in the last `N` days")
	fs.StringVar(&f.export, "export", "", "with --from-db: also write the jobs as a native trace to this CSV `file`")
	fs.IntVar(&f.maxJobs, "max-jobs", 0, "with --from-db: replay at most the `N` most recent jobs; 0: all")
	f.whatIfFlag = map[string]bool{"data": true, "db": true, "days": true, "export": true, "max-jobs": true}
}

// check refuses flags that do not go together with --from-db or without it.
func (f *simDBFlags) check(set map[string]bool) error {
	if !f.on {
		for name := range set {
			if f.whatIfFlag[name] {
				return fmt.Errorf("sim: --%s needs --from-db", name)
			}
		}
		return nil
	}
	for _, name := range []string{"trace", "format", "assign-teams", "forecast", "forecast-every", "forecast-arrivals", "jitter-seed"} {
		if set[name] {
			return fmt.Errorf("sim: --%s does not go with --from-db: the jobs come from the database", name)
		}
	}
	if f.days < 1 || f.days > 3660 {
		return fmt.Errorf("sim: --days %d: want 1 to 3660 days", f.days)
	}
	if f.maxJobs < 0 {
		return fmt.Errorf("sim: --max-jobs %d: want 0 (all) or more", f.maxJobs)
	}
	return nil
}

// simOutput is how sim prints its results.
type simOutput struct {
	json bool
	plot string
}

// simFromDB is `gpuportal sim --from-db`: it reads the jobs finished in
// the last days from the database, replays them under each policy on the
// cluster's GPUs (those the store saw in the window, unless --cluster
// names others) and prints them beside what actually happened.
func simFromDB(ctx context.Context, f simDBFlags, cfg sim.Config, policies []string, out simOutput, stdout, stderr io.Writer) error {
	dsn := f.db
	if dsn == "" {
		dsn = "sqlite:" + filepath.Join(f.data, "gpuportal.db")
	}
	store, err := models.Open(ctx, dsn)
	if err != nil {
		return fmt.Errorf("sim: --from-db: %w", err)
	}
	defer store.Close()
	since := time.Now().Add(-time.Duration(f.days) * 24 * time.Hour)
	recs, err := app.WhatIfHistory(ctx, store, since, whatIfHistoryLimit)
	if err != nil {
		return fmt.Errorf("sim: --from-db: %w", err)
	}
	if len(recs) == whatIfHistoryLimit {
		fmt.Fprintf(stderr, "sim: read the %d most recently finished jobs only\n", whatIfHistoryLimit)
	}
	if len(cfg.Nodes) == 0 {
		gpus, err := app.GPUsSeen(ctx, store, since)
		if err != nil {
			return fmt.Errorf("sim: --from-db: %w", err)
		}
		if cfg.Nodes = whatif.Nodes(gpus); len(cfg.Nodes) == 0 {
			return errors.New("sim: --from-db: the database saw no GPU in the window; name the cluster with --cluster")
		}
	}
	if len(cfg.Teams) == 0 {
		if cfg.Teams, err = app.WhatIfTeams(ctx, store); err != nil {
			return fmt.Errorf("sim: --from-db: %w", err)
		}
	}
	if f.export != "" {
		jobs, _ := whatif.Trace(recs)
		if err := writeTraceFile(f.export, jobs); err != nil {
			return fmt.Errorf("sim: --export: %w", err)
		}
	}
	rep, err := whatif.Compare(ctx, recs, whatif.Config{Candidates: policies, Sim: cfg, MaxJobs: f.maxJobs})
	if errors.Is(err, whatif.ErrNoJobs) {
		return fmt.Errorf("sim: --from-db: no job finished in the last %d days", f.days)
	}
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	fmt.Fprintf(stderr, "sim: %d jobs submitted %s to %s, on %d nodes of %d GPUs\n", rep.Jobs,
		rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339), rep.Nodes, rep.GPUs)
	if out.plot != "" {
		results := make([]*sim.Result, len(rep.Rows))
		for i, row := range rep.Rows {
			results[i] = &sim.Result{Policy: row.Name, Jobs: row.Jobs, Finished: row.Finished, AvgJCT: row.AvgJCTS, JCTs: row.JCTs}
		}
		title := fmt.Sprintf("JCT CDF: the last %d days on %d GPUs, as run and replayed", f.days, rep.GPUs)
		if err := simWritePlot(out.plot, results, title); err != nil {
			return fmt.Errorf("sim: --plot: %w", err)
		}
	}
	if out.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return whatif.WriteTable(stdout, rep)
}

// whatIfHistoryLimit bounds the jobs a what-if reads from the database.
const whatIfHistoryLimit = 200_000

// writeTraceFile writes jobs to path as a native trace.
func writeTraceFile(path string, jobs []trace.Job) (err error) {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := file.Close(); err == nil {
			err = cerr
		}
	}()
	return trace.WriteNative(file, jobs)
}
