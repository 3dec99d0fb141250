package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/spf13/cobra"
)

// notifyHelp is what "gpuportal notify --help" says besides the commands.
const notifyHelp = `Your notifications: be told by email or a webhook when your jobs start,
end, are preempted or wait too long.

Every command takes --server URL (or --context NAME) and the API token as
"gpuportal job" does (gpuportal job --help); show and set take -o json|yaml.`

// notifyCmd is the notify command; it shares the job command's server,
// contexts, token and client.
type notifyCmd struct {
	jobCmd
}

// notifyCommand is "gpuportal notify ...", a client of
// /api/v1/me/notifications.
func (c notifyCmd) notifyCommand() *cobra.Command {
	return group(&cobra.Command{Use: "notify", Short: "show and set your notifications (email, webhook)", Long: notifyHelp},
		c.showCommand(), c.setCommand(), c.testCommand())
}

// showCommand is notify show.
func (c notifyCmd) showCommand() *cobra.Command {
	f := c.flags("show [flags]", "your settings and the latest notifications", "json", "yaml")
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapCmdErr("notify show", &err)
		if len(pos) > 0 {
			return fmt.Errorf("unexpected argument %q", pos[0])
		}
		cl, err := c.client(f)
		if err != nil {
			return err
		}
		var raw json.RawMessage
		s, err := cl.Notifications(ctx, client.RawJSON(&raw))
		if err != nil {
			return err
		}
		return c.write(f, raw, s)
	})
}

// write prints the settings as -o asks: the API's JSON or YAML, else a
// table for people.
func (c notifyCmd) write(f *jobFlags, raw []byte, s api.NotificationSettings) error {
	return c.emit(f, raw, nil, func(bool) error {
		c.print(s)
		return nil
	})
}

// print writes settings and deliveries for people.
func (c notifyCmd) print(s api.NotificationSettings) {
	none := func(v string) string {
		if v == "" {
			return "-"
		}
		return v
	}
	w := c.stdout
	email := none(s.Email)
	if s.Email != "" && !s.EmailEnabled {
		email += " (this server sends no email: its operator has not configured SMTP)"
	}
	fmt.Fprintf(w, "email:       %s\n", email)
	fmt.Fprintf(w, "webhook:     %s\n", none(s.WebhookURL))
	secret := "not set"
	if s.WebhookSecretSet {
		secret = "set"
	}
	fmt.Fprintf(w, "secret:      %s\n", secret)
	fmt.Fprintf(w, "events:      %s\n", none(strings.Join(s.Events, ",")))
	if s.HeldAfterHours > 0 {
		fmt.Fprintf(w, "held after:  %s\n", time.Duration(s.HeldAfterHours*float64(time.Hour)).Round(time.Second))
	}
	if len(s.Deliveries) == 0 {
		fmt.Fprintln(w, "\nno notifications yet")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WHEN\tJOB\tEVENT\tBY\tDELIVERY\tATTEMPTS\tNEXT TRY\tLAST ERROR")
	for _, d := range s.Deliveries {
		job := "test"
		if d.JobID != 0 {
			job = fmt.Sprint(d.JobID)
		}
		next := "-"
		if d.NextAttemptAt != nil {
			next = c.ago(*d.NextAttemptAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", c.ago(d.At), job, d.Event, d.Channel, d.State, d.Attempts, next,
			cell(none(d.LastError), 60))
	}
	tw.Flush()
}

// setCommand is notify set.
func (c notifyCmd) setCommand() *cobra.Command {
	f := c.flags("set [flags]", "change your settings: an empty value clears one (--email \"\"); --webhook-secret-file - reads the secret from stdin", "json", "yaml")
	email := f.fs.String("email", "", `email address; "" clears it`)
	hook := f.fs.String("webhook-url", "", `webhook URL (http or https); "" clears it`)
	secretFile := f.fs.String("webhook-secret-file", "", `file holding the webhook's signing secret (its first line), - for stdin; an empty file clears it`)
	events := f.fs.String("events", "", "comma-separated events: started, succeeded, failed, preempted, timed_out, cancelled, held; \"\" for none")
	held := f.fs.Duration("held-after", 0, "with the held event: a job waiting longer than this is told of (e.g. 6h)")
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapCmdErr("notify set", &err)
		if len(pos) > 0 {
			return fmt.Errorf("unexpected argument %q", pos[0])
		}
		set := visited(f)
		var upd api.NotificationSettingsUpdate
		if !set["email"] && !set["webhook-url"] && !set["webhook-secret-file"] && !set["events"] && !set["held-after"] {
			return errors.New("nothing to set: give --email, --webhook-url, --webhook-secret-file, --events or --held-after")
		}
		if set["email"] {
			upd.Email = email
		}
		if set["webhook-url"] {
			upd.WebhookURL = hook
		}
		if set["webhook-secret-file"] {
			s, err := c.readSecret(*secretFile)
			if err != nil {
				return err
			}
			upd.WebhookSecret = &s
		}
		if set["events"] {
			es := []string{}
			for _, e := range strings.Split(*events, ",") {
				if e = strings.TrimSpace(e); e != "" {
					es = append(es, e)
				}
			}
			upd.Events = &es
		}
		if set["held-after"] {
			if *held < 0 {
				return errors.New("--held-after: must be 0 or more")
			}
			h := held.Hours()
			upd.HeldAfterHours = &h
		}
		cl, err := c.client(f)
		if err != nil {
			return err
		}
		var raw json.RawMessage
		s, err := cl.SetNotifications(ctx, upd, client.RawJSON(&raw))
		if err != nil {
			return withFlag(err)
		}
		return c.write(f, raw, s)
	})
}

// readSecret reads the first line of file, or of stdin for "-".
func (c notifyCmd) readSecret(file string) (string, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(io.LimitReader(c.stdin, 4096))
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return "", fmt.Errorf("--webhook-secret-file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(line, "\r"), nil
}

// testCommand is notify test.
func (c notifyCmd) testCommand() *cobra.Command {
	f := c.flags("test [flags]", "send a test notification by each channel")
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapCmdErr("notify test", &err)
		if len(pos) > 0 {
			return fmt.Errorf("unexpected argument %q", pos[0])
		}
		cl, err := c.client(f)
		if err != nil {
			return err
		}
		t, err := cl.TestNotification(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "%s queued; \"gpuportal notify show\" tells whether %s arrived\n",
			plural(t.Queued, "test notification"), map[bool]string{true: "they", false: "it"}[t.Queued > 1])
		return nil
	})
}

// flagOfField names the set flag of each field of the settings.
var flagOfField = map[string]string{
	"email": "--email", "webhook_url": "--webhook-url", "webhook_secret": "--webhook-secret-file",
	"events": "--events", "held_after_hours": "--held-after",
}

// withFlag names, in the server's refusal of a field, the flag that set it.
func withFlag(err error) error {
	if flag, known := flagOfField[client.FieldOf(err)]; known {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return err
}
