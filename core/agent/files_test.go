package agent

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/jobfiles"
)

// A job's files are served from its folder and the data paths, the
// owner's account put in those that name it; nothing else.
func TestDialFilesServesTheJobsFolderAndDataPaths(t *testing.T) {
	scratch := t.TempDir()
	if err := os.MkdirAll(filepath.Join(scratch, "alice"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "alice", "data.csv"), []byte("a,b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, exits := newLimitAgent(t, Config{DataPaths: []jobfiles.Root{{Name: "scratch", Dir: scratch + "/" + UserToken}}})
	if err := a.Start(context.Background(), job.Spec{JobID: 5, Run: 1, Command: []string{"sh", "-c", `echo done; echo 42 > "$GPUPORTAL_CHECKPOINT_DIR/step"`}}); err != nil {
		t.Fatal(err)
	}
	if ex := waitExit(t, exits); ex.ExitCode != 0 {
		t.Fatalf("job: %+v", ex)
	}
	c := a.JobFiles(5, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := c.List(ctx, jobfiles.JobRoot, jobfiles.CheckpointDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Entries) != 1 || l.Entries[0].Name != "step" || strings.Join(l.Roots, ",") != "job,scratch" {
		t.Errorf("checkpoint listing %+v", l)
	}
	for _, tc := range []struct{ root, path, want string }{
		{jobfiles.JobRoot, "output.log", "done\n"},
		{"scratch", "data.csv", "a,b\n"},
	} {
		d, err := c.Open(ctx, tc.root, tc.path)
		if err != nil {
			t.Fatalf("%s:%s: %v", tc.root, tc.path, err)
		}
		b, _ := io.ReadAll(d.Body)
		d.Body.Close()
		if string(b) != tc.want {
			t.Errorf("%s:%s = %q, want %q", tc.root, tc.path, b, tc.want)
		}
	}
	// A job that never ran here has no folder.
	other := a.JobFiles(6, "alice")
	if _, err := other.List(ctx, jobfiles.JobRoot, "."); err == nil || !strings.Contains(err.Error(), "no folder on this machine") {
		t.Errorf("job 6's files: %v, want no folder", err)
	}
}

// TestMakeDataPaths: with MakeDataPaths (serve --dev), the owner's data
// path's folder is made, 0700, the first time their files are reached;
// without it, a missing folder stays missing.
func TestMakeDataPaths(t *testing.T) {
	for _, mk := range []bool{true, false} {
		userdata := t.TempDir()
		a, _ := newLimitAgent(t, Config{MakeDataPaths: mk, DataPaths: []jobfiles.Root{{Name: "data", Dir: userdata + "/" + UserToken}}})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := a.JobFiles(5, "carol").List(ctx, "data", ".")
		cancel()
		fi, serr := os.Stat(filepath.Join(userdata, "carol"))
		switch {
		case mk && (err != nil || serr != nil || fi.Mode().Perm() != 0o700):
			t.Errorf("made: listing %v; folder %v, %v; want an empty folder, 0700", err, fi, serr)
		case !mk && (err == nil || serr == nil):
			t.Errorf("not made: listing %v, folder %v; want neither", err, serr)
		}
	}
}

func TestParseDataPath(t *testing.T) {
	for in, want := range map[string]string{
		"scratch=/scratch/{user}": "",
		"data=/datasets":          "",
		"scratch":                 "want NAME=/DIR",
		"job=/x":                  "names the job's own folder",
		"x=relative":              "absolute path",
		"a b=/x":                  "the name must be",
		"x=/s/{uid}":              "the only placeholder",
	} {
		_, err := ParseDataPath(in)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("ParseDataPath(%q): %v, want %q", in, err, want)
		}
	}
}

// A Jupyter session's file browser opens on the user's chosen folder,
// else the job's.
func TestJupyterRootIsTheWorkFolder(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{
		{"", "/work/jobs/3"},
		{"data/run1", "/work/jobs/3/data/run1"},
		{"/scratch/alice/project", "/scratch/alice/project"},
	} {
		s := job.Spec{JobID: 3, Dir: tc.dir, Command: []string{"jupyter-lab"},
			Session: &job.Session{Type: job.SessionJupyter, BaseURL: "/sessions/3/x/", Token: strings.Repeat("t", 32)}}
		ss, err := sessionCommand(s, "/work/jobs/3", nil, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Join(ss.argv, " ")
		if !strings.Contains(args, "--ServerApp.root_dir="+tc.want+" ") || !strings.Contains(args, "--NotebookApp.notebook_dir="+tc.want) {
			t.Errorf("dir %q: %s; want the root %s", tc.dir, args, tc.want)
		}
	}
}
