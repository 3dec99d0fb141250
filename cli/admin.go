package cli

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuportal/gpuportal/models"
	"github.com/spf13/cobra"
)

// adminCommand is "gpuportal admin ...": users, teams, tokens and
// machines, managed directly in the database.
func (c jobCmd) adminCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "admin", Short: "manage users, teams and API tokens in the database"})
	data := cmd.PersistentFlags().String("data", "./data", "data folder of the SQLite database")
	db := cmd.PersistentFlags().String("db", "", `database: "sqlite:PATH" or a "postgres://..." URL (default: SQLite in --data)`)
	open := func(sub *cobra.Command, run adminRun, reads bool) *cobra.Command {
		sub.Args = cobra.NoArgs
		sub.RunE = func(sub *cobra.Command, _ []string) error {
			dsn := *db
			if dsn == "" {
				dsn = "sqlite:" + filepath.Join(*data, "gpuportal.db")
			}
			if reads {
				if err := sqliteExists(dsn); err != nil {
					return err
				}
			}
			store, err := models.Open(sub.Context(), dsn)
			if err != nil {
				return err
			}
			defer store.Close()
			return run(sub.Context(), adminCmd{store: store, stdin: c.stdin, stdout: c.stdout, stderr: c.stderr})
		}
		return sub
	}
	// withStore runs a command that changes the database, making it where
	// there is none (the first admin of a new installation); withReader
	// one that only reads it, refused where there is none.
	withStore := func(sub *cobra.Command, run adminRun) *cobra.Command { return open(sub, run, false) }
	withReader := func(sub *cobra.Command, run adminRun) *cobra.Command { return open(sub, run, true) }
	// plain is a command without flags of its own.
	plain := func(use, short string, run func(adminCmd, context.Context) error) (*cobra.Command, adminRun) {
		return &cobra.Command{Use: use, Short: short}, func(ctx context.Context, a adminCmd) error { return run(a, ctx) }
	}
	cmd.AddCommand(
		withStore(adminCreateTeam()),
		withStore(adminCreateUser()),
		withStore(adminResetPassword()),
		withStore(adminSetRole()),
		withStore(adminSetUnixName()),
		withStore(adminCreateToken()),
		withReader(plain("list-users", "list the users", adminCmd.listUsers)),
		withReader(adminListTokens()),
		withStore(adminRevokeToken()),
		withStore(adminChangeUser("disable-user", "disable an account: no login; sessions end, tokens refused, waiting jobs held")),
		withStore(adminChangeUser("enable-user", "undo disable-user; held jobs released")),
		withStore(adminChangeUser("delete-user", "delete an account: jobs stay (waiting ones held); tokens, templates go")),
		withReader(adminAudit()),
		withStore(adminCreateJoinToken()),
		withReader(plain("list-join-tokens", "list the join tokens", adminCmd.listJoinTokens)),
		withStore(adminRevokeJoinToken()),
		withReader(plain("list-machines", "list the machines", adminCmd.listMachines)),
		withStore(adminRemoveMachine()),
	)
	return cmd
}

// sqliteExists refuses a SQLite dsn whose file does not exist, naming
// it: a command that only reads would make an empty database there and
// print nothing, as if the real one were empty. Other databases pass.
func sqliteExists(dsn string) error {
	path, ok := strings.CutPrefix(dsn, "sqlite:")
	if !ok {
		return nil
	}
	path, _, _ = strings.Cut(path, "?")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no database at %s: give --data (or --db) as serve has it", path)
	}
	return nil
}

// adminRun runs an admin command on the database.
type adminRun func(ctx context.Context, a adminCmd) error

type adminCmd struct {
	store          *models.Store
	stdin          io.Reader
	stdout, stderr io.Writer
}

func required(flagName, v string) error {
	if v == "" {
		return fmt.Errorf("--%s is required", flagName)
	}
	return nil
}

func (a adminCmd) record(ctx context.Context, action, target, detail string) error {
	return a.store.Audit(ctx, models.AuditEntry{At: time.Now(), Actor: "admin-cli", Action: action, Target: target, Detail: detail, From: "cli"})
}

// adminCreateTeam is admin create-team.
func adminCreateTeam() (*cobra.Command, adminRun) {
	cmd := &cobra.Command{Use: "create-team --name NAME [--guarantee GPUS]", Short: "create a team"}
	fs := cmd.Flags()
	name := fs.String("name", "", "team name")
	guarantee := fs.Int("guarantee", 0, "guaranteed GPUs")
	return cmd, func(ctx context.Context, a adminCmd) error {
		if err := required("name", *name); err != nil {
			return err
		}
		if _, err := a.store.CreateTeam(ctx, *name, *guarantee); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "team %s created (guarantee %d GPUs)\n", *name, *guarantee)
		return a.record(ctx, "team.create", *name, fmt.Sprintf("guarantee %d", *guarantee))
	}
}

// password reads one line from stdin, or makes a random password and
// prints it once.
func (a adminCmd) password(fromStdin bool, user string) (string, error) {
	if fromStdin {
		line, err := bufio.NewReader(a.stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read password: %w", err)
		}
		pw := strings.TrimRight(line, "\r\n")
		if len(pw) < 8 {
			return "", errors.New("password: must be at least 8 characters")
		}
		if len(pw) > 72 {
			return "", errors.New("password: must be at most 72 bytes (bcrypt reads no further)")
		}
		return pw, nil
	}
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random password: %w", err)
	}
	pw := base64.RawURLEncoding.EncodeToString(b)
	fmt.Fprintf(a.stdout, "password of %s (shown once): %s\n", user, pw)
	return pw, nil
}

// adminCreateUser is admin create-user.
func adminCreateUser() (*cobra.Command, adminRun) {
	cmd := &cobra.Command{Use: "create-user --name NAME --role researcher|lead|admin [--team TEAM] [--password-stdin]", Short: "create a user; without --password-stdin a random password is made and printed once"}
	fs := cmd.Flags()
	name := fs.String("name", "", "user name")
	role := fs.String("role", "", "researcher, lead or admin")
	team := fs.String("team", "", "team (required for researchers and leads)")
	stdin := fs.Bool("password-stdin", false, "read the password from stdin")
	completeValues(cmd, "role", []string{"researcher", "lead", "admin"}, "role")
	return cmd, func(ctx context.Context, a adminCmd) error {
		if err := required("name", *name); err != nil {
			return err
		}
		r := models.Role(*role)
		if !r.Valid() {
			return fmt.Errorf("--role %q: must be researcher, lead or admin", *role)
		}
		if r != models.RoleAdmin && *team == "" {
			return fmt.Errorf("--team is required for a %s", r)
		}
		if *team != "" {
			if err := a.teamExists(ctx, *team); err != nil {
				return err
			}
		}
		pw, err := a.password(*stdin, *name)
		if err != nil {
			return err
		}
		if _, err := a.store.CreateUser(ctx, *name, pw, r, *team); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "user %s created (%s)\n", *name, r)
		return a.record(ctx, "user.create", *name, fmt.Sprintf("role %s team %s", r, *team))
	}
}

func (a adminCmd) teamExists(ctx context.Context, team string) error {
	ts, err := a.store.Teams(ctx)
	if err != nil {
		return err
	}
	for _, t := range ts {
		if t.Name == team {
			return nil
		}
	}
	return fmt.Errorf("--team %q: no such team (create it with create-team)", team)
}

// adminResetPassword is admin reset-password.
func adminResetPassword() (*cobra.Command, adminRun) {
	cmd := &cobra.Command{Use: "reset-password --name NAME [--password-stdin]", Short: "set a user's password; without --password-stdin a random one is made and printed once"}
	fs := cmd.Flags()
	name := fs.String("name", "", "user name")
	stdin := fs.Bool("password-stdin", false, "read the password from stdin")
	return cmd, func(ctx context.Context, a adminCmd) error {
		if err := required("name", *name); err != nil {
			return err
		}
		if _, err := a.store.UserByName(ctx, *name); err != nil {
			return err
		}
		pw, err := a.password(*stdin, *name)
		if err != nil {
			return err
		}
		if err := a.store.SetPassword(ctx, *name, pw); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "password of %s reset; their sessions, API tokens and live connections are ended\n", *name)
		return a.record(ctx, "user.password", *name, "sessions and tokens ended")
	}
}

// adminSetRole is admin set-role.
func adminSetRole() (*cobra.Command, adminRun) {
	cmd := &cobra.Command{Use: "set-role --name NAME --role ROLE [--team TEAM]", Short: "set a user's role and team"}
	fs := cmd.Flags()
	name := fs.String("name", "", "user name")
	role := fs.String("role", "", "researcher, lead or admin")
	team := fs.String("team", "", "team")
	completeValues(cmd, "role", []string{"researcher", "lead", "admin"}, "role")
	return cmd, func(ctx context.Context, a adminCmd) error {
		if err := required("name", *name); err != nil {
			return err
		}
		if err := a.store.SetRole(ctx, *name, models.Role(*role), *team); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s is now %s of %q\n", *name, *role, *team)
		return a.record(ctx, "user.role", *name, fmt.Sprintf("role %s team %s", *role, *team))
	}
}

// adminSetUnixName is admin set-unix-name.
func adminSetUnixName() (*cobra.Command, adminRun) {
	cmd := &cobra.Command{Use: "set-unix-name --name NAME --unix-name ACCOUNT", Short: "set the Unix account the user's jobs run as"}
	fs := cmd.Flags()
	name := fs.String("name", "", "user name")
	unix := fs.String("unix-name", "", "Unix account the user's jobs run as")
	return cmd, func(ctx context.Context, a adminCmd) error {
		if err := required("name", *name); err != nil {
			return err
		}
		if err := required("unix-name", *unix); err != nil {
			return err
		}
		if err := models.CheckUnixName(*unix); err != nil {
			return fmt.Errorf("--unix-name %w", err)
		}
		if err := a.store.SetUnixName(ctx, *name, *unix); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "jobs of %s run as the Unix account %s\n", *name, *unix)
		return a.record(ctx, "user.unix_name", *name, "unix name "+*unix)
	}
}

// adminCreateToken is admin create-token.
func adminCreateToken() (*cobra.Command, adminRun) {
	cmd := &cobra.Command{Use: "create-token --name NAME [--label LABEL] [--ttl 720h]", Short: "create an API token"}
	fs := cmd.Flags()
	name := fs.String("name", "", "user name")
	label := fs.String("label", "cli", "what the token is for")
	ttl := fs.Duration("ttl", 30*24*time.Hour, "how long the token is valid")
	return cmd, func(ctx context.Context, a adminCmd) error {
		if err := required("name", *name); err != nil {
			return err
		}
		if *ttl <= 0 {
			return fmt.Errorf("--ttl %v: must be positive", *ttl)
		}
		u, err := a.store.UserByName(ctx, *name)
		if err != nil {
			return err
		}
		tok, err := a.store.CreateAPIToken(ctx, u.ID, *label, time.Now(), *ttl)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "API token of %s (shown once, valid %v): %s\n", *name, *ttl, tok)
		return a.record(ctx, "token.create", *name, *label)
	}
}

func (a adminCmd) listUsers(ctx context.Context) error {
	us, err := a.store.Users(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tROLE\tTEAM\tUNIX\tSOURCE\tSTATE")
	for _, u := range us {
		state := "enabled"
		if u.Disabled() {
			state = fmt.Sprintf("disabled by %s at %s", u.DisabledBy, u.DisabledAt.Local().Format(time.DateTime))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", u.Name, u.Role, u.Team, cmp.Or(u.UnixName, u.Name), cmp.Or(u.Source, models.SourceLocal), state)
	}
	return w.Flush()
}

// adminListTokens is admin list-tokens.
func adminListTokens() (*cobra.Command, adminRun) {
	cmd := &cobra.Command{Use: "list-tokens --name NAME", Short: "a user's API tokens (names and dates)"}
	fs := cmd.Flags()
	name := fs.String("name", "", "user name")
	return cmd, func(ctx context.Context, a adminCmd) error {
		if err := required("name", *name); err != nil {
			return err
		}
		ts, err := a.store.UserTokens(ctx, *name, time.Now())
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tCREATED\tEXPIRES")
		for _, t := range ts {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.Local().Format(time.DateTime), t.ExpiresAt.Local().Format(time.DateTime))
		}
		return w.Flush()
	}
}

// adminRevokeToken is admin revoke-token.
func adminRevokeToken() (*cobra.Command, adminRun) {
	cmd := &cobra.Command{Use: "revoke-token --name NAME --id ID", Short: "revoke an API token"}
	fs := cmd.Flags()
	name := fs.String("name", "", "user name")
	id := fs.Int64("id", 0, "token ID (list-tokens)")
	return cmd, func(ctx context.Context, a adminCmd) error {
		if err := required("name", *name); err != nil {
			return err
		}
		if *id <= 0 {
			return errors.New("--id is required: a token's ID from list-tokens")
		}
		if err := a.store.RevokeUserToken(ctx, *name, *id); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "token %d of %s revoked; connections opened with it end within seconds\n", *id, *name)
		return a.record(ctx, "token.revoke", *name, strconv.FormatInt(*id, 10))
	}
}

// adminChangeUser is the command cmd that disables, enables or deletes an account. A running server
// sees the change at its next look-up of a session or token, and ends the
// user's live connections within seconds (web/sockets.go).
func adminChangeUser(cmd, short string) (*cobra.Command, adminRun) {
	c := &cobra.Command{Use: cmd + " --name NAME", Short: short}
	name := c.Flags().String("name", "", "user name")
	return c, func(ctx context.Context, a adminCmd) error {
		if err := required("name", *name); err != nil {
			return err
		}
		now := time.Now()
		switch cmd {
		case "disable-user":
			n, err := a.store.DisableUser(ctx, *name, "admin-cli", now)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s is disabled: sessions ended, tokens refused, %d waiting jobs held\n", *name, n)
			return a.record(ctx, "user.disable", *name, fmt.Sprintf("%d waiting jobs held", n))
		case "enable-user":
			n, err := a.store.EnableUser(ctx, *name, now)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s is enabled; %d held jobs released\n", *name, n)
			return a.record(ctx, "user.enable", *name, fmt.Sprintf("%d jobs released", n))
		}
		n, err := a.store.DeleteUser(ctx, *name, "admin-cli", now)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s is deleted; %d waiting jobs held until an admin cancels them\n", *name, n)
		return a.record(ctx, "user.delete", *name, fmt.Sprintf("%d waiting jobs held", n))
	}
}

// adminAudit is admin audit.
func adminAudit() (*cobra.Command, adminRun) {
	cmd := &cobra.Command{Use: "audit [--limit 50]", Short: "the audit log"}
	fs := cmd.Flags()
	limit := fs.Int("limit", 50, "entries to show")
	return cmd, func(ctx context.Context, a adminCmd) error {
		es, err := a.store.AuditLog(ctx, *limit)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "WHEN\tWHO\tWHAT\tTARGET\tDETAIL\tFROM")
		for _, e := range es {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.At.Local().Format(time.DateTime), e.Actor, e.Action, e.Target, e.Detail, e.From)
		}
		return w.Flush()
	}
}
