package filehttp

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/core/jobfiles"
)

// HelperArgs are the arguments of the helper command (RunHelper) that
// serves roots with limits.
func HelperArgs(roots []jobfiles.Root, limits jobfiles.Limits) []string {
	args := []string{"--max-upload", strconv.FormatInt(limits.MaxUpload, 10), "--max-archive", strconv.FormatInt(limits.MaxArchive, 10)}
	for _, r := range roots {
		args = append(args, "--root", r.Name+"="+r.Dir)
	}
	return args
}

// RunHelper serves a job's files on its standard input and output, one
// connection, as whatever account runs it: the agent starts it as the
// job's account (agent-files). args are HelperArgs'.
func RunHelper(ctx context.Context, args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent-files", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var s Server
	fs.Int64Var(&s.Limits.MaxUpload, "max-upload", jobfiles.DefaultMaxUpload, "largest file an upload may write, in bytes")
	fs.Int64Var(&s.Limits.MaxArchive, "max-archive", jobfiles.DefaultMaxArchive, "most bytes of files a folder's archive may hold")
	fs.Func("root", "a folder to serve, NAME=DIR (repeatable)", func(v string) error {
		name, dir, ok := strings.Cut(v, "=")
		if !ok || name == "" || !strings.HasPrefix(dir, "/") {
			return fmt.Errorf("%q: want NAME=/absolute/dir", v)
		}
		s.Roots = append(s.Roots, jobfiles.Root{Name: name, Dir: dir})
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("agent-files: unexpected argument %q", fs.Arg(0))
	}
	if os.Geteuid() == 0 {
		// Never: the agent starts it as the job's account.
		return fmt.Errorf("agent-files: refusing to serve files as root")
	}
	return ServeConn(ctx, &s, StdioConn(stdin, stdout))
}
