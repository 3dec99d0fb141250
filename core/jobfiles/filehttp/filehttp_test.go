package filehttp

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuportal/gpuportal/core/jobfiles"
)

// fixture is a job folder with output, a checkpoint, a link inside, a
// link out, and a FIFO; outside it, a secret.
func fixture(t *testing.T) (*Client, string) {
	t.Helper()
	base := t.TempDir()
	job := filepath.Join(base, "jobs", "7")
	must(t, os.MkdirAll(filepath.Join(job, "checkpoint", "step-2"), 0o700))
	must(t, os.WriteFile(filepath.Join(job, "output.log"), []byte("hello\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(job, "checkpoint", "step-2", "model.pt"), []byte("weights"), 0o600))
	must(t, os.Symlink("step-2", filepath.Join(job, "checkpoint", "latest")))
	must(t, os.WriteFile(filepath.Join(base, "secret"), []byte("not yours"), 0o600))
	must(t, os.Symlink("../../secret", filepath.Join(job, "escape")))
	must(t, os.Symlink("/etc", filepath.Join(job, "etc")))
	must(t, syscall.Mkfifo(filepath.Join(job, "fifo"), 0o600))
	data := filepath.Join(base, "data")
	must(t, os.MkdirAll(data, 0o700))
	s := &Server{Roots: []jobfiles.Root{{Name: jobfiles.JobRoot, Dir: job}, {Name: "data", Dir: data}}, Limits: jobfiles.Limits{MaxUpload: 16, MaxArchive: 1 << 20}}
	return NewClient(func(ctx context.Context) (net.Conn, error) {
		a, b := net.Pipe()
		go func() { _ = ServeConn(context.Background(), s, b) }()
		return a, nil
	}), job
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func kind(err error) jobfiles.Kind {
	var e *jobfiles.Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

func TestListReadArchive(t *testing.T) {
	c, _ := fixture(t)
	ctx := context.Background()
	l, err := c.List(ctx, jobfiles.JobRoot, "/")
	must(t, err)
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Name+":"+e.Type)
	}
	want := []string{"checkpoint:dir", "escape:link", "etc:link", "fifo:other", "output.log:file"}
	if !slices.Equal(names, want) {
		t.Errorf("entries %v, want %v", names, want)
	}
	if !slices.Equal(l.Roots, []string{"job", "data"}) || l.Limits.MaxUpload != 16 {
		t.Errorf("roots %v, limits %+v", l.Roots, l.Limits)
	}
	d, err := c.Open(ctx, jobfiles.JobRoot, "output.log")
	must(t, err)
	b, _ := io.ReadAll(d.Body)
	d.Body.Close()
	if string(b) != "hello\n" || d.Size != 6 {
		t.Errorf("output.log: %q (%d bytes)", b, d.Size)
	}
	// A link inside the root is followed to read.
	d, err = c.Open(ctx, jobfiles.JobRoot, "checkpoint/latest/model.pt")
	must(t, err)
	b, _ = io.ReadAll(d.Body)
	d.Body.Close()
	if string(b) != "weights" {
		t.Errorf("through a link inside: %q", b)
	}

	a, err := c.Archive(ctx, jobfiles.JobRoot, "checkpoint")
	must(t, err)
	zr, err := gzip.NewReader(a.Body)
	must(t, err)
	tr := tar.NewReader(zr)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		body, _ := io.ReadAll(tr)
		got[h.Name] = string(body) + h.Linkname
	}
	a.Body.Close()
	wantTar := map[string]string{"checkpoint/": "", "checkpoint/latest": "step-2", "checkpoint/step-2/": "", "checkpoint/step-2/model.pt": "weights"}
	if len(got) != len(wantTar) {
		t.Errorf("archive %v, want %v", got, wantTar)
	}
	for k, v := range wantTar {
		if got[k] != v {
			t.Errorf("archive %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func TestRefusals(t *testing.T) {
	c, _ := fixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		what, op, root, path string
		want                 jobfiles.Kind
		msg                  string
	}{
		{"dot-dot", "file", jobfiles.JobRoot, "../secret", jobfiles.Invalid, `".." is not allowed`},
		{"dot-dot inside", "list", jobfiles.JobRoot, "checkpoint/../..", jobfiles.Invalid, `".." is not allowed`},
		{"a link out, relative", "file", jobfiles.JobRoot, "escape", jobfiles.Denied, "leads out of the folder"},
		{"a link out, absolute", "list", jobfiles.JobRoot, "etc", jobfiles.Denied, "leads out of the folder"},
		{"through a link out", "file", jobfiles.JobRoot, "etc/passwd", jobfiles.Denied, "leads out of the folder"},
		{"archive of a link out", "archive", jobfiles.JobRoot, "etc", jobfiles.Denied, "leads out of the folder"},
		{"a FIFO", "file", jobfiles.JobRoot, "fifo", jobfiles.Invalid, "not a regular file"},
		{"a folder as a file", "file", jobfiles.JobRoot, "checkpoint", jobfiles.Invalid, "download it as an archive"},
		{"missing", "file", jobfiles.JobRoot, "nope", jobfiles.NotFound, "no such file"},
		{"unknown root", "list", "scratch", ".", jobfiles.NotFound, `root "scratch"`},
	} {
		var err error
		switch tc.op {
		case "file":
			_, err = c.Open(ctx, tc.root, tc.path)
		case "list":
			_, err = c.List(ctx, tc.root, tc.path)
		case "archive":
			_, err = c.Archive(ctx, tc.root, tc.path)
		}
		if kind(err) != tc.want || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v (%s), want %s saying %q", tc.what, err, kind(err), tc.want, tc.msg)
		}
	}
}

func TestPut(t *testing.T) {
	c, job := fixture(t)
	ctx := context.Background()
	e, err := c.Put(ctx, jobfiles.JobRoot, "checkpoint/new.txt", 5, strings.NewReader("12345"))
	must(t, err)
	if b, _ := os.ReadFile(filepath.Join(job, "checkpoint", "new.txt")); string(b) != "12345" || e.Size != 5 || e.Type != jobfiles.TypeFile {
		t.Errorf("uploaded %q, entry %+v", b, e)
	}
	// Over the limit: known size, refused before the body; unknown size,
	// refused once past it; nothing left behind either way.
	for _, size := range []int64{17, -1} {
		_, err := c.Put(ctx, jobfiles.JobRoot, "big.bin", size, strings.NewReader(strings.Repeat("x", 17)))
		if kind(err) != jobfiles.TooLarge || !strings.Contains(err.Error(), "upload limit of 16 B (agent --max-upload)") {
			t.Errorf("size %d: %v, want too large naming the limit", size, err)
		}
	}
	des, _ := os.ReadDir(job)
	for _, d := range des {
		if strings.Contains(d.Name(), "big") || strings.Contains(d.Name(), ".upload-") {
			t.Errorf("a refused upload left %s", d.Name())
		}
	}
	// Writing through a link out, over a link, into a missing folder.
	for _, tc := range []struct {
		path string
		want jobfiles.Kind
	}{{"etc/evil", jobfiles.Denied}, {"escape", jobfiles.Invalid}, {"nope/x", jobfiles.NotFound}, {"../x", jobfiles.Invalid}, {"/", jobfiles.Invalid}} {
		if _, err := c.Put(ctx, jobfiles.JobRoot, tc.path, 1, strings.NewReader("x")); kind(err) != tc.want {
			t.Errorf("put %s: %v, want %s", tc.path, err, tc.want)
		}
	}
}

func TestArchiveLimit(t *testing.T) {
	c, job := fixture(t)
	must(t, os.WriteFile(filepath.Join(job, "checkpoint", "huge"), make([]byte, 2<<20), 0o600))
	_, err := c.Archive(context.Background(), jobfiles.JobRoot, "checkpoint")
	if kind(err) != jobfiles.TooLarge || !strings.Contains(err.Error(), "archive limit (agent --max-archive)") {
		t.Errorf("archive over the limit: %v", err)
	}
}

// BenchmarkDownload reads a 16 MiB file through the protocol, over a
// pipe as the in-process agent serves it.
func BenchmarkDownload(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 16<<20), 0o600); err != nil {
		b.Fatal(err)
	}
	s := &Server{Roots: []jobfiles.Root{{Name: jobfiles.JobRoot, Dir: dir}}}
	c := NewClient(func(ctx context.Context) (net.Conn, error) {
		a, p := net.Pipe()
		go func() { _ = ServeConn(context.Background(), s, p) }()
		return a, nil
	})
	b.SetBytes(16 << 20)
	for b.Loop() {
		d, err := c.Open(context.Background(), jobfiles.JobRoot, "big")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, d.Body); err != nil {
			b.Fatal(err)
		}
		d.Body.Close()
	}
}
