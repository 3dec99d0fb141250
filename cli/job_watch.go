package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
)

// watchFlags are --watch and its --interval, of job list and job get.
type watchFlags struct {
	watch    bool
	interval time.Duration
}

func (w *watchFlags) register(f *jobFlags) {
	f.fs.BoolVarP(&w.watch, "watch", "w", false, "after the jobs, print each job again when it changes (its state, reason, placement, exit code); "+
		"with IDs, until they have all ended, else until interrupted")
	f.fs.DurationVar(&w.interval, "interval", 2*time.Second, "with --watch: how often to ask the server")
}

// check refuses flags that --watch cannot go with, naming them.
func (w *watchFlags) check(f *jobFlags, format string, start bool) error {
	switch {
	case w.interval <= 0:
		return fmt.Errorf("--interval %s: must be positive", w.interval)
	case !w.watch && visited(f)["interval"]:
		return errors.New("--interval: only with --watch")
	case w.watch && format != "":
		return errors.New("--watch and --format: give one (--watch prints the table, -o json, yaml, wide or name)")
	case w.watch && start:
		return errors.New("--watch and --start: give one")
	}
	return nil
}

// getJobs prints the jobs named by ID (job get ID...): -o json and yaml
// print the one job as an object, several as a list; with --watch, then
// each change until they have all ended.
func (c jobCmd) getJobs(ctx context.Context, cl *client.Client, ids []int64, f *jobFlags, lf listFlags, wf watchFlags) error {
	fetch := func(ctx context.Context) ([]api.Job, json.RawMessage, error) {
		jobs := make([]api.Job, len(ids))
		raws := make([]json.RawMessage, len(ids))
		for i, id := range ids {
			j, err := cl.Job(ctx, id, client.RawJSON(&raws[i]))
			if err != nil {
				if len(ids) > 1 {
					err = fmt.Errorf("job %d: %w", id, err)
				}
				return nil, nil, err
			}
			jobs[i] = j
		}
		if len(ids) == 1 {
			return jobs, raws[0], nil
		}
		raw, err := json.Marshal(raws)
		if err != nil {
			return nil, nil, fmt.Errorf("encode jobs: %w", err)
		}
		return jobs, raw, nil
	}
	jobs, raw, err := fetch(ctx)
	if err != nil {
		return err
	}
	if err := c.writeJobs(jobs, raw, f, lf, jobListColumns, "no jobs"); err != nil {
		return err
	}
	if !wf.watch || allEnded(jobs) {
		return nil
	}
	return c.watchJobs(ctx, f, lf, wf, jobs, func(ctx context.Context) ([]api.Job, error) {
		jobs, _, err := fetch(ctx)
		return jobs, err
	}, true)
}

// watchJobs asks fetch for the jobs every wf.interval and prints those
// that changed since shown (first: the jobs printed already), as -o
// asks, the table without its header, until ctx is done (nil: the user
// stopped watching) or, with untilEnded, every job has ended.
func (c jobCmd) watchJobs(ctx context.Context, f *jobFlags, lf listFlags, wf watchFlags, first []api.Job, fetch func(context.Context) ([]api.Job, error), untilEnded bool) error {
	shown := make(map[int64]string, len(first))
	for _, j := range first {
		shown[j.ID] = watchKey(j)
	}
	lf.noHeaders = true
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wf.interval):
		}
		jobs, err := fetch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		for _, j := range jobs {
			k := watchKey(j)
			if shown[j.ID] == k {
				continue
			}
			shown[j.ID] = k
			raw, err := json.Marshal(j)
			if err != nil {
				return fmt.Errorf("encode job %d: %w", j.ID, err)
			}
			if err := c.writeJobs([]api.Job{j}, raw, f, lf, jobListColumns, ""); err != nil {
				return err
			}
		}
		if untilEnded && allEnded(jobs) {
			return nil
		}
	}
}

// watchKey is what --watch shows a job again for when it changes: not
// its figures, which change with every reading.
func watchKey(j api.Job) string {
	return strings.Join([]string{string(j.State), j.Reason, strings.Join(j.Placement, ","), exitCodeText(j.ExitCode, ""),
		strconv.Itoa(j.Queue), strconv.FormatBool(j.Held)}, "\x00")
}

func allEnded(jobs []api.Job) bool {
	return !slices.ContainsFunc(jobs, func(j api.Job) bool { return !client.Ended(j) })
}
