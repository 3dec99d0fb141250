package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/spf13/cobra"
)

// sessionHelp is what "gpuportal session --help" says besides the commands.
const sessionHelp = `Interactive sessions: Jupyter, a terminal, or a web app of yours, on GPUs,
opened through the portal (docs/portal.md, "Interactive sessions").

A web session's COMMAND, after --, serves the app on 127.0.0.1:$PORT (or
--port) under $GPUPORTAL_BASE_URL; a Jupyter session's COMMAND, if given,
is the Jupyter program to run.`

// sessionCommand is "gpuportal session ...".
func (c jobCmd) sessionCommand() *cobra.Command {
	return group(&cobra.Command{Use: "session", Short: "start Jupyter, a terminal or a web app on GPUs", Long: sessionHelp},
		c.sessionStartCommand(),
		c.sessionOpenCommand(),
		c.cancelCommand("stop", "end sessions (their jobs are cancelled)"),
		c.sessionKeepAliveCommand(),
	)
}

// sessionStartCommand is session start: it submits a session job.
func (c jobCmd) sessionStartCommand() *cobra.Command {
	f := c.flags("start --type jupyter|terminal|web [flags] [-- COMMAND...]", "start a session", "json", "yaml", "name")
	var req api.SubmitRequest
	sr := &api.SessionRequest{}
	f.fs.StringVar(&sr.Type, "type", "", "what the session serves: jupyter, terminal or web (required)")
	f.fs.IntVar(&sr.Port, "port", 0, "web sessions: the loopback port the app listens on (0: one the agent picks, as $PORT)")
	f.fs.StringVar(&req.Name, "name", "", "the session's name (default: its type)")
	f.fs.StringVar(&req.Team, "team", "", "the team the session runs for (default: yours)")
	f.fs.IntVar(&req.GPUs, "gpus", 1, "GPUs the session holds")
	f.fs.StringVar(&req.TimeLimit, "time", "", "the longest the session runs, as 4h or 1-00:00:00 (default and most: the team's session maximum)")
	f.fs.BoolVar(&sr.Priority, "priority", false, "ask for interactive priority: ahead of the team's waiting jobs, within the GPUs the team allows sessions with it")
	wait := f.fs.Bool("wait", false, "wait until the session runs, then print its address")
	f.complete("type", func() []string { return []string{"jupyter", "terminal", "web"} }, "session type")
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapCmdErr("session start", &err)
		var argv []string
		if dash := f.cmd.ArgsLenAtDash(); dash >= 0 {
			pos, argv = pos[:dash], pos[dash:]
		}
		if len(pos) > 0 {
			return fmt.Errorf("unexpected argument %q: put a command after --", pos[0])
		}
		if sr.Type == "" {
			return errors.New("--type is required: jupyter, terminal or web")
		}
		if !job.SessionType(sr.Type).Valid() {
			return fmt.Errorf("--type %q: want jupyter, terminal or web", sr.Type)
		}
		if req.Name == "" {
			req.Name = sr.Type
		}
		req.Session, req.Command = sr, api.Command(argv)
		cl, err := c.client(f)
		if err != nil {
			return err
		}
		var raw json.RawMessage
		j, err := cl.Submit(ctx, req, client.RawJSON(&raw))
		if err != nil {
			return sessionFlagForField(err)
		}
		err = c.emit(f, raw, jobNames(j), func(bool) error {
			if f.parsable {
				fmt.Fprintln(c.stdout, j.ID)
				return nil
			}
			fmt.Fprintf(c.stdout, "session %d submitted: %s, %s for team %s (%s)\n", j.ID, sr.Type, plural(j.GPUs, "GPU"), j.Team, j.State)
			if j.Session != nil && j.Session.URL != "" {
				fmt.Fprintf(c.stdout, "open it at %s once it runs\n", cl.Server().JoinPath(j.Session.URL).String())
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !*wait {
			return nil
		}
		for {
			cur, err := cl.Job(ctx, j.ID)
			if ctx.Err() != nil {
				return c.interrupted(j.ID)
			}
			if err != nil {
				return err
			}
			switch {
			case cur.State == job.Running:
				fmt.Fprintf(c.stdout, "session %d runs on %s\n", j.ID, strings.Join(cur.Placement, ", "))
				return nil
			case ended(cur):
				return c.jobEnded(cur)
			}
			select {
			case <-ctx.Done():
				return c.interrupted(j.ID)
			case <-time.After(waitInterval):
			}
		}
	})
}

// sessionOpenCommand is session open: it prints the address of a
// session.
func (c jobCmd) sessionOpenCommand() *cobra.Command {
	f := c.flags("open ID [flags]", "print the address to open a session at")
	f.cmd.ValidArgsFunction = c.jobIDs(f, false)
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapCmdErr("session open", &err)
		id, err := oneJobID("open", pos)
		if err != nil {
			return err
		}
		cl, err := c.client(f)
		if err != nil {
			return err
		}
		j, err := cl.Job(ctx, id)
		if err != nil {
			return err
		}
		switch {
		case j.Session == nil:
			return fmt.Errorf("job %d is a batch job, not a session", id)
		case j.Session.URL == "":
			return fmt.Errorf("the session of job %d is %s's: only its owner or an admin may open it", id, j.User)
		}
		fmt.Fprintln(c.stdout, cl.Server().JoinPath(j.Session.URL).String())
		return nil
	})
}

// sessionKeepAliveCommand is session keep-alive: it keeps a session (or any running job of the caller's)
// from being reclaimed while idle for the next --hours hours.
func (c jobCmd) sessionKeepAliveCommand() *cobra.Command {
	f := c.flags("keep-alive ID --hours N [flags]", "keep an idle session from being stopped for the next N hours (at most its team's maximum keep-alive)", "json", "yaml", "name")
	f.cmd.ValidArgsFunction = c.jobIDs(f, false)
	hours := f.fs.Float64("hours", 0, "how many hours to keep the session alive though idle (required)")
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapCmdErr("session keep-alive", &err)
		id, err := oneJobID("keep alive", pos)
		if err != nil {
			return err
		}
		if !(*hours > 0) {
			return fmt.Errorf("--hours %v: want a number of hours above 0", *hours)
		}
		cl, err := c.client(f)
		if err != nil {
			return err
		}
		var raw json.RawMessage
		j, err := cl.KeepAlive(ctx, id, *hours, client.RawJSON(&raw))
		if err != nil {
			return err
		}
		return c.emit(f, raw, jobNames(j), func(bool) error {
			if j.Idle != nil && j.Idle.KeepAliveUntil != nil {
				_, err := fmt.Fprintf(c.stdout, "job %d kept alive until %s\n", id, j.Idle.KeepAliveUntil.Local().Format("2006-01-02 15:04"))
				return err
			}
			_, err := fmt.Fprintf(c.stdout, "job %d kept alive for %v hours\n", id, *hours)
			return err
		})
	})
}

// sessionFlagForField adds the flag to fix to a refused session.
func sessionFlagForField(err error) error {
	switch client.FieldOf(err) {
	case "session.type":
		return withHint(err, "Fix --type.")
	case "session.port":
		return withHint(err, "Fix --port.")
	}
	return flagForField(err)
}
