package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
)

// A job's files (docs/files.md): job files lists a folder, job download
// fetches a file or a folder (as a .tar.gz), job upload writes a file;
// on the machine that ran the job, as the job's Unix account.

// fileOutputs are the -o values of job files.
var fileOutputs = []string{"json", "yaml"}

// fileFlags adds --root and --node to f: where in a job's files a
// command reaches.
func fileFlags(f *jobFlags) (root, node *string) {
	root = f.fs.String("root", "", "the folder: job (the job's own, default) or a data path its machine allows (agent --data-path)")
	node = f.fs.String("node", "", "the machine, for a job on several (each has its own job folder); default: its first, rank 0")
	return root, node
}

// filesCommand is job files ID [PATH].
func (c jobCmd) filesCommand() *cobra.Command {
	f := c.flags("files ID [PATH] [flags]", "list a folder of a job's files (its own folder, its checkpoints, a data path)", fileOutputs...)
	root, node := fileFlags(f)
	f.cmd.ValidArgsFunction = c.jobIDs(f, false)
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapJobErr("files", &err)
		if len(pos) < 1 || len(pos) > 2 {
			return fmt.Errorf("want a job ID and, optionally, a folder, got %d arguments", len(pos))
		}
		id, err := parseJobID(pos[0])
		if err != nil {
			return err
		}
		p := ""
		if len(pos) == 2 {
			p = pos[1]
		}
		cl, err := c.client(f)
		if err != nil {
			return err
		}
		var raw json.RawMessage
		l, err := cl.Files(ctx, id, client.FileRef{Root: *root, Path: p, Node: *node}, client.RawJSON(&raw))
		if err != nil {
			return err
		}
		return c.emit(f, raw, nil, func(bool) error { return c.printFiles(l) })
	})
}

// printFiles writes a folder's entries for people.
func (c jobCmd) printFiles(l api.FileListing) error {
	fmt.Fprintf(c.stdout, "job %d, %s:%s on %s\n", l.Job, l.Root, l.Path, l.Node)
	if len(l.Nodes) > 1 {
		fmt.Fprintf(c.stdout, "(the job ran on %s, each with its own folder: --node names one)\n", strings.Join(l.Nodes, ", "))
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tSIZE\tMODIFIED\tNAME")
	for _, e := range l.Entries {
		name, size := e.Name, fmt.Sprint(e.Size)
		switch e.Type {
		case "dir":
			name, size = name+"/", "-"
		case "link":
			name += " -> " + e.Target
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Type, size, c.ago(e.ModTime), name)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(l.Entries) == 0 {
		fmt.Fprintln(c.stdout, "(empty)")
	}
	if l.Truncated {
		fmt.Fprintln(c.stdout, "(more entries than listed)")
	}
	return nil
}

// downloadCommand is job download ID PATH.
func (c jobCmd) downloadCommand() *cobra.Command {
	f := c.flags("download ID PATH [flags]", "download a file of a job's files, or a folder as a .tar.gz")
	root, node := fileFlags(f)
	to := f.fs.String("to", "", "write it here (- for standard output); default: its name (a folder's with .tar.gz) in the current folder")
	archive := f.fs.Bool("archive", false, "PATH is a folder: download it as a .tar.gz (found out by itself otherwise)")
	f.cmd.ValidArgsFunction = c.jobIDs(f, false)
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapJobErr("download", &err)
		if len(pos) != 2 {
			return fmt.Errorf("want a job ID and a path, got %d arguments", len(pos))
		}
		id, err := parseJobID(pos[0])
		if err != nil {
			return err
		}
		cl, err := c.client(f)
		if err != nil {
			return err
		}
		return c.download(ctx, cl, id, client.FileRef{Root: *root, Path: pos[1], Node: *node}, *to, *archive)
	})
}

func (c jobCmd) download(ctx context.Context, cl *client.Client, id int64, ref client.FileRef, to string, archive bool) error {
	name := path.Base(path.Clean("/" + ref.Path))
	if name == "/" {
		name, archive = fmt.Sprintf("job-%d", id), true
	}
	get := cl.DownloadFile
	if archive {
		get, name = cl.DownloadFolder, name+".tar.gz"
	}
	if to == "-" {
		_, err := get(ctx, id, ref, c.stdout)
		if isFolderError(err) {
			_, err = cl.DownloadFolder(ctx, id, ref, c.stdout)
		}
		return err
	}
	if to == "" {
		to = name
	}
	n, err := c.downloadTo(ctx, get, id, ref, to)
	if isFolderError(err) && to == name {
		to = name + ".tar.gz"
		n, err = c.downloadTo(ctx, cl.DownloadFolder, id, ref, to)
	} else if isFolderError(err) {
		n, err = c.downloadTo(ctx, cl.DownloadFolder, id, ref, to)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "gpuportal: wrote %s (%d bytes)\n", to, n)
	return nil
}

// downloadTo writes what get fetches to file to, through a temporary
// file beside it, so that a failed download leaves nothing behind.
func (c jobCmd) downloadTo(ctx context.Context, get func(context.Context, int64, client.FileRef, io.Writer) (int64, error), id int64, ref client.FileRef, to string) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(to), "."+filepath.Base(to)+".part-*")
	if err != nil {
		return 0, fmt.Errorf("--to %s: %w", to, err)
	}
	n, err := get(ctx, id, ref, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), to)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return n, err
	}
	return n, nil
}

// isFolderError reports whether err is the server's refusal to send a
// folder as a file.
func isFolderError(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Status == http.StatusBadRequest && strings.Contains(ce.Message, "download it as an archive")
}

// uploadCommand is job upload ID FILE [DEST].
func (c jobCmd) uploadCommand() *cobra.Command {
	f := c.flags("upload ID FILE [DEST] [flags]", "upload a file into a job's files (its folder, or a data path), as the job's account")
	root, node := fileFlags(f)
	f.cmd.ValidArgsFunction = c.jobIDs(f, false)
	return f.run(func(ctx context.Context, pos []string) (err error) {
		defer wrapJobErr("upload", &err)
		if len(pos) < 2 || len(pos) > 3 {
			return fmt.Errorf("want a job ID, a file and, optionally, where to put it, got %d arguments", len(pos))
		}
		id, err := parseJobID(pos[0])
		if err != nil {
			return err
		}
		src, err := os.Open(pos[1])
		if err != nil {
			return err
		}
		defer src.Close()
		st, err := src.Stat()
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%s: not a regular file", pos[1])
		}
		dest := filepath.Base(pos[1])
		if len(pos) == 3 {
			dest = pos[2]
			if strings.HasSuffix(dest, "/") {
				dest += filepath.Base(pos[1])
			}
		}
		cl, err := c.client(f)
		if err != nil {
			return err
		}
		e, err := cl.UploadFile(ctx, id, client.FileRef{Root: *root, Path: dest, Node: *node}, src, st.Size())
		if err != nil {
			return err
		}
		r := *root
		if r == "" {
			r = "job"
		}
		on := ""
		if *node != "" {
			on = " on " + *node
		}
		fmt.Fprintf(c.stdout, "uploaded %s (%d bytes) to job %d, %s:%s%s\n", pos[1], e.Size, id, r, strings.TrimPrefix(path.Clean("/"+dest), "/"), on)
		return nil
	})
}
