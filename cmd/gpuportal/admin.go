package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuportal/gpuportal/models"
)

const adminUsage = `Usage: gpuportal admin [--db DSN | --data DIR] COMMAND [flags]

Commands:
  create-team    --name NAME [--guarantee GPUS]
  create-user    --name NAME --role researcher|lead|admin [--team TEAM] [--password-stdin]
  reset-password --name NAME [--password-stdin]
  set-role       --name NAME --role ROLE [--team TEAM]
  set-unix-name  --name NAME --unix-name ACCOUNT   the Unix account the user's jobs run as
  create-token   --name NAME [--label LABEL] [--ttl 720h]
  list-users
  list-tokens    --name NAME                  a user's API tokens (names and dates)
  revoke-token   --name NAME --id ID
  disable-user   --name NAME                  no login; sessions end, tokens refused, waiting jobs held
  enable-user    --name NAME                  undo disable-user; held jobs released
  delete-user    --name NAME                  jobs stay (waiting ones held); tokens, templates go
  audit          [--limit 50]
  create-join-token --name NAME [--ttl 24h]   let agents join new machines (shown once)
  list-join-tokens
  revoke-join-token --id ID
  list-machines
  remove-machine    --name NAME               forget a machine and its credential

Without --password-stdin a random password is generated and printed once.
`

// runAdmin manages users, teams and tokens directly in the database.
func runAdmin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, adminUsage) }
	data := fs.String("data", "./data", "data folder of the SQLite database")
	db := fs.String("db", "", `database: "sqlite:PATH" or a "postgres://..." URL (default: SQLite in --data)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("admin: no command given")
	}
	dsn := *db
	if dsn == "" {
		dsn = "sqlite:" + filepath.Join(*data, "gpuportal.db")
	}
	store, err := models.Open(ctx, dsn)
	if err != nil {
		return err
	}
	defer store.Close()
	a := adminCmd{store: store, stdin: stdin, stdout: stdout, stderr: stderr}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	switch cmd {
	case "create-team":
		return a.createTeam(ctx, rest)
	case "create-user":
		return a.createUser(ctx, rest)
	case "reset-password":
		return a.resetPassword(ctx, rest)
	case "set-role":
		return a.setRole(ctx, rest)
	case "set-unix-name":
		return a.setUnixName(ctx, rest)
	case "create-token":
		return a.createToken(ctx, rest)
	case "list-users":
		return a.listUsers(ctx)
	case "list-tokens":
		return a.listTokens(ctx, rest)
	case "revoke-token":
		return a.revokeToken(ctx, rest)
	case "disable-user", "enable-user", "delete-user":
		return a.changeUser(ctx, cmd, rest)
	case "audit":
		return a.audit(ctx, rest)
	case "create-join-token":
		return a.createJoinToken(ctx, rest)
	case "list-join-tokens":
		return a.listJoinTokens(ctx)
	case "revoke-join-token":
		return a.revokeJoinToken(ctx, rest)
	case "list-machines":
		return a.listMachines(ctx)
	case "remove-machine":
		return a.removeMachine(ctx, rest)
	}
	fs.Usage()
	return fmt.Errorf("admin: unknown command %q", cmd)
}

type adminCmd struct {
	store          *models.Store
	stdin          io.Reader
	stdout, stderr io.Writer
}

func (a adminCmd) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("admin "+name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	return fs
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

func (a adminCmd) createTeam(ctx context.Context, args []string) error {
	fs := a.flags("create-team")
	name := fs.String("name", "", "team name")
	guarantee := fs.Int("guarantee", 0, "guaranteed GPUs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required("name", *name); err != nil {
		return err
	}
	if _, err := a.store.CreateTeam(ctx, *name, *guarantee); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "team %s created (guarantee %d GPUs)\n", *name, *guarantee)
	return a.record(ctx, "team.create", *name, fmt.Sprintf("guarantee %d", *guarantee))
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

func (a adminCmd) createUser(ctx context.Context, args []string) error {
	fs := a.flags("create-user")
	name := fs.String("name", "", "user name")
	role := fs.String("role", "", "researcher, lead or admin")
	team := fs.String("team", "", "team (required for researchers and leads)")
	stdin := fs.Bool("password-stdin", false, "read the password from stdin")
	if err := fs.Parse(args); err != nil {
		return err
	}
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

func (a adminCmd) resetPassword(ctx context.Context, args []string) error {
	fs := a.flags("reset-password")
	name := fs.String("name", "", "user name")
	stdin := fs.Bool("password-stdin", false, "read the password from stdin")
	if err := fs.Parse(args); err != nil {
		return err
	}
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

func (a adminCmd) setRole(ctx context.Context, args []string) error {
	fs := a.flags("set-role")
	name := fs.String("name", "", "user name")
	role := fs.String("role", "", "researcher, lead or admin")
	team := fs.String("team", "", "team")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := required("name", *name); err != nil {
		return err
	}
	if err := a.store.SetRole(ctx, *name, models.Role(*role), *team); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s is now %s of %q\n", *name, *role, *team)
	return a.record(ctx, "user.role", *name, fmt.Sprintf("role %s team %s", *role, *team))
}

func (a adminCmd) setUnixName(ctx context.Context, args []string) error {
	fs := a.flags("set-unix-name")
	name := fs.String("name", "", "user name")
	unix := fs.String("unix-name", "", "Unix account the user's jobs run as")
	if err := fs.Parse(args); err != nil {
		return err
	}
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

func (a adminCmd) createToken(ctx context.Context, args []string) error {
	fs := a.flags("create-token")
	name := fs.String("name", "", "user name")
	label := fs.String("label", "cli", "what the token is for")
	ttl := fs.Duration("ttl", 30*24*time.Hour, "how long the token is valid")
	if err := fs.Parse(args); err != nil {
		return err
	}
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

func (a adminCmd) listTokens(ctx context.Context, args []string) error {
	fs := a.flags("list-tokens")
	name := fs.String("name", "", "user name")
	if err := fs.Parse(args); err != nil {
		return err
	}
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

func (a adminCmd) revokeToken(ctx context.Context, args []string) error {
	fs := a.flags("revoke-token")
	name := fs.String("name", "", "user name")
	id := fs.Int64("id", 0, "token ID (list-tokens)")
	if err := fs.Parse(args); err != nil {
		return err
	}
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

// changeUser disables, enables or deletes an account. A running server
// sees the change at its next look-up of a session or token, and ends the
// user's live connections within seconds (web/sockets.go).
func (a adminCmd) changeUser(ctx context.Context, cmd string, args []string) error {
	fs := a.flags(cmd)
	name := fs.String("name", "", "user name")
	if err := fs.Parse(args); err != nil {
		return err
	}
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

func (a adminCmd) audit(ctx context.Context, args []string) error {
	fs := a.flags("audit")
	limit := fs.Int("limit", 50, "entries to show")
	if err := fs.Parse(args); err != nil {
		return err
	}
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
