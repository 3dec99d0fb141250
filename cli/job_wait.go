package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/gpuportal/gpuportal/core/job"
)

// submitFlags are the flags of gpuportal job submit that say what it
// prints and whether it waits.
type submitFlags struct {
	wait bool
	// tasks is how many tasks the submission's array makes; 0: no array.
	tasks int
	// sbatch prints as Slurm's sbatch does (gpuportal sbatch).
	sbatch bool
}

func (s *submitFlags) register(f *jobFlags) {
	f.fs.BoolVar(&f.parsable, "parsable", false, "print only the job's ID (as sbatch --parsable)")
	f.fs.BoolVar(&s.wait, "wait", false, "wait until the job ends; exit 0 if it succeeded, 3 if it failed, 4 if cancelled, 5 if timed out")
}

// waitInterval is how often submit --wait asks for the job's state.
const waitInterval = time.Second

// send submits req (job submit, sbatch) and says what became of it
// (submitted); a refusal naming a field names its flag.
func (c jobCmd) send(ctx context.Context, f *jobFlags, sf submitFlags, req api.SubmitRequest) error {
	cl, err := c.client(f)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	j, err := cl.Submit(ctx, req, client.RawJSON(&raw))
	if err != nil {
		return flagForField(err)
	}
	sf.tasks = arrayTasks(req)
	return c.submitted(ctx, cl, f, sf, j, raw)
}

// submitted prints a job the server accepted (raw, its JSON) as the
// flags ask, then waits for it to end with --wait.
func (c jobCmd) submitted(ctx context.Context, cl *client.Client, f *jobFlags, sf submitFlags, j api.Job, raw []byte) error {
	err := c.emit(f, raw, jobNames(j), func(wide bool) error {
		switch {
		case f.parsable:
			fmt.Fprintln(c.stdout, j.ID)
		case sf.sbatch && !wide:
			fmt.Fprintln(c.stdout, batchLine(j.ID))
		default:
			fmt.Fprintln(c.stdout, submittedLine(j, sf.tasks))
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !sf.wait {
		return nil
	}
	if sf.tasks > 0 && j.Array != nil {
		return c.waitArray(ctx, cl, j.Array.ID, waitInterval)
	}
	end, err := c.waitJob(ctx, cl, j.ID, waitInterval)
	if err != nil {
		return err
	}
	return c.jobEnded(end)
}

// waitJob asks for a job's state every interval until it ends, and
// returns it ended; an interrupted wait is an exitStatus.
func (c jobCmd) waitJob(ctx context.Context, cl *client.Client, id int64, interval time.Duration) (api.Job, error) {
	j, err := cl.WaitJob(ctx, id, interval)
	if ctx.Err() != nil {
		return api.Job{}, c.interrupted(id)
	}
	return j, err
}

// waitArray waits for every task of array id to end, then exits as the
// array ended: succeeded once every task has, else as its first task, by
// index, that did not (as a dependency on the array reads it). --wait
// waited for the first task alone, and exited 0 when it had succeeded
// whatever the others did.
func (c jobCmd) waitArray(ctx context.Context, cl *client.Client, id int64, interval time.Duration) error {
	for {
		a, err := cl.Array(ctx, id)
		if ctx.Err() != nil {
			return c.arrayInterrupted(id)
		}
		if err != nil {
			return err
		}
		done := true
		for _, t := range a.Tasks {
			done = done && ended(t)
		}
		if done {
			return c.arrayEnded(a)
		}
		select {
		case <-ctx.Done():
			return c.arrayInterrupted(id)
		case <-time.After(interval):
		}
	}
}

// arrayEnded says how array a ended and returns its exit status.
func (c jobCmd) arrayEnded(a api.Array) error {
	end := api.Job{ID: a.ID, State: job.Succeeded}
	for _, t := range a.Tasks { // by index
		if t.State != job.Succeeded {
			end = t
			break
		}
	}
	var counts []string
	for _, st := range job.States {
		if n := a.States[st]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, st))
		}
	}
	msg := fmt.Sprintf("array %d %s (%s)", a.ID, end.State, strings.Join(counts, ", "))
	if end.State != job.Succeeded && end.Array != nil {
		msg += fmt.Sprintf(": task %d, job %d, first", end.Array.Index, end.ID)
		if end.ExitCode != nil {
			msg += fmt.Sprintf(" (exit code %d)", *end.ExitCode)
		}
	}
	return c.ended(msg, end.State)
}

// ended reports whether a job has ended (client.Ended).
func ended(j api.Job) bool { return client.Ended(j) }
