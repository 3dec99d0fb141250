package server

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// parseServeFlags reads serve's flags from args as serve does.
func parseServeFlags(args []string, stderr io.Writer) (serveFlags, error) {
	var f serveFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	check := f.register(fs)
	if err := fs.Parse(args); err != nil {
		return f, fmt.Errorf("serve: %w", err)
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	return f, check()
}
