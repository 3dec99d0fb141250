package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/internal/testarchive"
)

// TestRunRestoresTheServersCopy: a run whose machine has no checkpoint of
// the job, or an older one, gets the server's copy put in place before it
// starts, and resumes from it, told which run wrote it and where; a run
// whose machine holds the newer checkpoint keeps its own; a copy that
// cannot be fetched leaves the run to start from its folder, saying why;
// a run stopped while its copy comes never starts, and its exit is not
// the job's fault.
func TestRunRestoresTheServersCopy(t *testing.T) {
	show := `echo "resume=${GPUPORTAL_RESUME:-} from=${GPUPORTAL_RESUME_RUN:-} step=$(cat "$GPUPORTAL_CHECKPOINT_DIR/step" 2>/dev/null)"`
	written := time.Now().Add(-time.Minute).Round(time.Millisecond)
	serve := func(body string) func(context.Context) (io.ReadCloser, error) {
		arc := testarchive.Folder(t, "checkpoint", map[string]string{"step": body}, written)
		return func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(arc)), nil }
	}
	copyOf := func(run int64, fetch func(context.Context) (io.ReadCloser, error)) *job.CheckpointCopy {
		return &job.CheckpointCopy{Run: run, Node: "n9", At: written, Token: "t", Fetch: fetch}
	}
	t.Run("empty folder here", func(t *testing.T) {
		a, exits := newTestAgent(t, time.Second)
		if err := a.Start(context.Background(), job.Spec{JobID: 3, Run: 4, Command: []string{"sh", "-c", show}, GPUs: []int{0},
			Checkpoint: copyOf(3, serve("from n9"))}); err != nil {
			t.Fatal(err)
		}
		ex := waitExit(t, exits)
		out, _ := os.ReadFile(a.LogPath(3))
		if ex.ExitCode != 0 || !strings.Contains(string(out), "resume=1 from=3 step=from n9\n") ||
			!strings.Contains(string(out), "gpuportal: run 4 restored the checkpoint run 3 saved on n9 at ") ||
			!strings.Contains(string(out), "gpuportal: run 4 resumes from the checkpoint run 3 wrote at ") {
			t.Errorf("exit %+v, output:\n%s\nwant run 4 resumed from n9's run 3", ex, out)
		}
		if r := ex.Resume; r == nil || r.FromRun != 3 || r.FromNode != "n9" || !r.CheckpointAt.Equal(written) {
			t.Errorf("exit's resume %+v, want from run 3 on n9 written %v", r, written)
		}
		if c := ex.Checkpoint; c == nil || !c.At.Equal(written) || c.Files != 1 || c.Bytes != int64(len("from n9")) {
			t.Errorf("exit's checkpoint %+v, want the restored folder", c)
		}
	})
	t.Run("newer checkpoint here", func(t *testing.T) {
		a, exits := newTestAgent(t, time.Second)
		save := `echo mine > "$GPUPORTAL_CHECKPOINT_DIR/step"`
		if err := a.Start(context.Background(), job.Spec{JobID: 3, Run: 5, Command: []string{"sh", "-c", save}, GPUs: []int{0}}); err != nil {
			t.Fatal(err)
		}
		waitExit(t, exits)
		// The copy is run 3's: run 5 wrote here since.
		if err := a.Start(context.Background(), job.Spec{JobID: 3, Run: 6, Command: []string{"sh", "-c", show}, GPUs: []int{0},
			Checkpoint: copyOf(3, serve("from n9"))}); err != nil {
			t.Fatal(err)
		}
		waitExit(t, exits)
		out, _ := os.ReadFile(a.LogPath(3))
		if !strings.Contains(string(out), "resume=1 from=5 step=mine\n") || strings.Contains(string(out), "restored") {
			t.Errorf("output:\n%s\nwant run 6 to resume from its machine's run 5, nothing restored", out)
		}
	})
	t.Run("copy cannot be had", func(t *testing.T) {
		a, exits := newTestAgent(t, time.Second)
		broken := func(context.Context) (io.ReadCloser, error) { return nil, errors.New("the server answered 404") }
		if err := a.Start(context.Background(), job.Spec{JobID: 3, Run: 2, Command: []string{"sh", "-c", show}, GPUs: []int{0},
			Checkpoint: copyOf(1, broken)}); err != nil {
			t.Fatal(err)
		}
		ex := waitExit(t, exits)
		out, _ := os.ReadFile(a.LogPath(3))
		if ex.ExitCode != 0 || !strings.Contains(string(out), "gpuportal: run 2 could not restore the checkpoint run 1 saved on n9 at ") ||
			!strings.Contains(string(out), "the server answered 404; it starts from its checkpoint folder on n0 as it is") ||
			!strings.Contains(string(out), "resume= from= step=\n") {
			t.Errorf("exit %+v, output:\n%s\nwant run 2 to say why it has no checkpoint and start from scratch", ex, out)
		}
	})
	t.Run("stopped while the copy comes", func(t *testing.T) {
		a, exits := newTestAgent(t, time.Second)
		asked := make(chan struct{})
		slow := func(ctx context.Context) (io.ReadCloser, error) {
			close(asked)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if err := a.Start(context.Background(), job.Spec{JobID: 3, Run: 2, Command: []string{"sh", "-c", "echo started > " + filepath.Join(t.TempDir(), "x")}, GPUs: []int{0},
			Checkpoint: copyOf(1, slow)}); err != nil {
			t.Fatal(err)
		}
		<-asked
		if refs := a.Running(); len(refs) != 1 || refs[0] != (job.RunRef{Job: 3, Run: 2}) {
			t.Errorf("running while the copy comes: %v, want job 3 run 2", refs)
		}
		if err := a.Start(context.Background(), job.Spec{JobID: 3, Run: 3, Command: []string{"true"}, GPUs: []int{0}}); !errors.Is(err, job.ErrBusy) {
			t.Errorf("another start meanwhile: %v, want busy", err)
		}
		if err := a.Stop(context.Background(), job.RunRef{Job: 3, Run: 2}); err != nil {
			t.Fatal(err)
		}
		ex := waitExit(t, exits)
		if ex.Run != 2 || ex.ExitCode != -1 || !ex.Infra || !strings.Contains(ex.Err, "stopped while its checkpoint was being restored") {
			t.Errorf("exit %+v, want run 2 stopped before it started, not the job's fault", ex)
		}
		if len(a.Running()) != 0 {
			t.Errorf("still running: %v", a.Running())
		}
	})
	t.Run("a stop read before the start, called after", func(t *testing.T) {
		a, exits := newTestAgent(t, time.Second)
		release := make(chan struct{})
		arc := testarchive.Folder(t, "checkpoint", map[string]string{"step": "from n9"}, written)
		gated := func(context.Context) (io.ReadCloser, error) {
			<-release
			return io.NopCloser(bytes.NewReader(arc)), nil
		}
		if err := a.Start(context.Background(), job.Spec{JobID: 3, Run: 2, Command: []string{"sleep", "60"}, GPUs: []int{0},
			Checkpoint: copyOf(1, gated)}); err != nil {
			t.Fatal(err)
		}
		a.mu.Lock()
		stop := a.runs[3].stop // as Stop reads it, before the launch
		a.mu.Unlock()
		close(release)
		deadline := time.Now().Add(10 * time.Second)
		for {
			a.mu.Lock()
			r := a.runs[3]
			started := r != nil && !r.restoring && r.pgid > 0
			a.mu.Unlock()
			if started {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the run did not start once its copy was restored")
			}
			time.Sleep(5 * time.Millisecond)
		}
		stop()
		ex := waitExit(t, exits)
		if ex.Run != 2 || ex.ExitCode != -1 || ex.Infra || !strings.Contains(ex.Err, "killed by signal 15") {
			t.Errorf("exit %+v, want the started run ended by the stop (SIGTERM)", ex)
		}
	})
}

// TestCheckpointReaderSparesBigFolders: a run's usage reads a small
// checkpoint folder afresh every time, a folder of a thousand files or
// more at most every bigFolderEvery.
func TestCheckpointReaderSparesBigFolders(t *testing.T) {
	a, _ := newTestAgent(t, time.Second)
	for _, tc := range []struct {
		name   string
		files  int
		cached bool
	}{{"small", 3, false}, {"big", bigFolder, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := job.Spec{JobID: int64(100 + tc.files), Run: 1, Command: []string{"true"}}
			dir := a.CheckpointDir(s.JobID)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			for i := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			read := a.checkpointReader(s)
			if st := read(); st.Files != tc.files {
				t.Fatalf("first reading: %d files, want %d", st.Files, tc.files)
			}
			if err := os.WriteFile(filepath.Join(dir, "one-more"), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			want := tc.files + 1
			if tc.cached {
				want = tc.files
			}
			if st := read(); st.Files != want {
				t.Errorf("second reading at once: %d files, want %d", st.Files, want)
			}
		})
	}
}
