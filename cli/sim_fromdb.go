package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/cli/simcmd"
	"github.com/gpuportal/gpuportal/core/sim"
	"github.com/gpuportal/gpuportal/core/trace"
	"github.com/gpuportal/gpuportal/core/whatif"
	"github.com/gpuportal/gpuportal/models"
)

// simFromDB is `gpuportal sim --from-db`: it reads the jobs finished in
// the last days from the database, replays them under each policy on the
// cluster's GPUs (those the store saw in the window, unless --cluster
// names others) and prints them beside what actually happened.
func simFromDB(ctx context.Context, f simcmd.DBQuery, cfg sim.Config, policies []string, out simcmd.Output, stdout, stderr io.Writer) error {
	dsn := f.DB
	if dsn == "" {
		dsn = "sqlite:" + filepath.Join(f.Data, "gpuportal.db")
	}
	store, err := models.Open(ctx, dsn)
	if err != nil {
		return fmt.Errorf("sim: --from-db: %w", err)
	}
	defer store.Close()
	since := time.Now().Add(-time.Duration(f.Days) * 24 * time.Hour)
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
	if f.Export != "" {
		jobs, _ := whatif.Trace(recs)
		if err := writeTraceFile(f.Export, jobs); err != nil {
			return fmt.Errorf("sim: --export: %w", err)
		}
	}
	rep, err := whatif.Compare(ctx, recs, whatif.Config{Candidates: policies, Sim: cfg, MaxJobs: f.MaxJobs})
	if errors.Is(err, whatif.ErrNoJobs) {
		return fmt.Errorf("sim: --from-db: no job finished in the last %d days", f.Days)
	}
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	fmt.Fprintf(stderr, "sim: %d jobs submitted %s to %s, on %d nodes of %d GPUs\n", rep.Jobs,
		rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339), rep.Nodes, rep.GPUs)
	if out.Plot != "" {
		results := make([]*sim.Result, len(rep.Rows))
		for i, row := range rep.Rows {
			results[i] = &sim.Result{Policy: row.Name, Jobs: row.Jobs, Finished: row.Finished, AvgJCT: row.AvgJCTS, JCTs: row.JCTs}
		}
		title := fmt.Sprintf("JCT CDF: the last %d days on %d GPUs, as run and replayed", f.Days, rep.GPUs)
		if err := simcmd.WritePlot(out.Plot, results, title); err != nil {
			return fmt.Errorf("sim: --plot: %w", err)
		}
	}
	if out.JSON {
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
