package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuportal/gpuportal/client"
)

// Shell completion is cobra's: "gpuportal completion bash|zsh|fish"
// prints a script that asks the binary itself (its hidden __complete
// command) for the candidates, taken from the commands' own flags and
// the completion functions they register; job IDs come from the server.

// completionTimeout bounds what completion asks the server.
const completionTimeout = 3 * time.Second

// jobIDs completes job IDs with the user's jobs on the server that f's
// flags name, newest first; live: only jobs that have not ended (to
// cancel).
func (c jobCmd) jobIDs(f *jobFlags, live bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		t, err := c.target(f)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		cl, err := client.New(t.server.String(), t.token, client.WithHTTPClient(c.http), client.WithUserAgent("gpuportal-cli"))
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		p, err := cl.Jobs(ctx, client.JobQuery{Scope: "mine", Limit: 200})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, j := range p.Jobs {
			if live && j.State.Final() {
				continue
			}
			out = append(out, cobra.CompletionWithDesc(strconv.FormatInt(j.ID, 10), fmt.Sprintf("%s (%s)", cell(j.Name, 40), j.State)))
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	}
}
