package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
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

// ended reports whether a job has ended (client.Ended).
func ended(j api.Job) bool { return client.Ended(j) }
