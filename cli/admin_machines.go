package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// Join tokens and machines (docs/agents.md, "Joining machines").

// adminCreateJoinToken is admin create-join-token.
func adminCreateJoinToken() (*cobra.Command, adminRun) {
	cmd := &cobra.Command{Use: "create-join-token --name NAME [--ttl 24h]", Short: "let agents join new machines (the token is shown once)"}
	fs := cmd.Flags()
	name := fs.String("name", "", "what the token is for, such as \"rack 3\"")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long new machines may join with it; 0: until revoked")
	return cmd, func(ctx context.Context, a adminCmd) error {
		if err := required("name", *name); err != nil {
			return err
		}
		if *ttl < 0 {
			return fmt.Errorf("--ttl %s: want 0 or more", *ttl)
		}
		token, t, err := a.store.CreateJoinToken(ctx, *name, "admin-cli", time.Now(), *ttl)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "join token %d (%s), shown once; agents pass it as GPUPORTAL_AGENT_TOKEN:\n%s\n", t.ID, t.Name, token)
		return a.record(ctx, "join-token.create", strconv.FormatInt(t.ID, 10), fmt.Sprintf("%s, ttl %s", t.Name, *ttl))
	}
}

func (a adminCmd) listJoinTokens(ctx context.Context) error {
	ts, err := a.store.JoinTokens(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tSTATE\tMACHINES\tCREATED\tEXPIRES")
	for _, t := range ts {
		state, expires := "active", "never"
		if t.ExpiresAt != nil {
			expires = t.ExpiresAt.Format(time.DateTime)
		}
		if !t.Active(now) {
			state = "revoked or expired"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\n", t.ID, t.Name, state, t.Uses, t.CreatedAt.Format(time.DateTime), expires)
	}
	return w.Flush()
}

// adminRevokeJoinToken is admin revoke-join-token.
func adminRevokeJoinToken() (*cobra.Command, adminRun) {
	cmd := &cobra.Command{Use: "revoke-join-token --id ID", Short: "revoke a join token"}
	fs := cmd.Flags()
	id := fs.Int64("id", 0, "the join token's ID (list-join-tokens)")
	return cmd, func(ctx context.Context, a adminCmd) error {
		if *id <= 0 {
			return fmt.Errorf("--id is required: a join token's ID")
		}
		if err := a.store.RevokeJoinToken(ctx, *id, time.Now()); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "join token %d revoked; machines that joined with it keep their credentials\n", *id)
		return a.record(ctx, "join-token.revoke", strconv.FormatInt(*id, 10), "")
	}
}

func (a adminCmd) listMachines(ctx context.Context) error {
	ms, err := a.store.Machines(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tJOINED WITH\tJOINED\tLAST SEEN")
	for _, m := range ms {
		with := "--agent-token"
		if m.JoinedWith > 0 {
			with = "join token " + strconv.FormatInt(m.JoinedWith, 10)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.Name, with, m.CreatedAt.Format(time.DateTime), m.LastSeenAt.Format(time.DateTime))
	}
	return w.Flush()
}

// adminRemoveMachine is admin remove-machine.
func adminRemoveMachine() (*cobra.Command, adminRun) {
	cmd := &cobra.Command{Use: "remove-machine --name NAME", Short: "forget a machine and its credential"}
	fs := cmd.Flags()
	name := fs.String("name", "", "the machine's name")
	return cmd, func(ctx context.Context, a adminCmd) error {
		if err := required("name", *name); err != nil {
			return err
		}
		if err := a.store.RemoveMachine(ctx, *name); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "machine %s removed: its credential no longer works, and an agent may join under its name again\n", *name)
		return a.record(ctx, "machine.remove", *name, "")
	}
}
