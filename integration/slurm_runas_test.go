package integration

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSlurmRunsJobsAsAnUnprivilegedAccount: serve --executor slurm
// --slurm-run-as nobody with the default work folder, DATA/slurm, in a
// data folder the server made itself, as an operator starts it (issue 31).
// Slurm's slurmstepd opens the job's output.log as the job's account, and
// the job writes its checkpoint folder as it: both must be made for that
// account, and every folder above them passable by it. The other Slurm
// tests ran their jobs as root, or in a work folder the test had opened
// to all, and never saw that the data folder (0750) shut the job out.
func TestSlurmRunsJobsAsAnUnprivilegedAccount(t *testing.T) {
	needRootAccounts(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("this test runs jobs as nobody: %v", err)
	}
	c := startSlurm(t)
	// The throwaway cluster's own folder holds slurmd's spool, where the
	// job's batch script is (a real cluster's /var/spool/slurmd is open
	// to all); the work folder is not in it.
	if err := os.Chmod(c.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The data folder does not exist yet: the server makes it, as on a
	// first start. Only the test's own temporary folders above it are
	// opened.
	data := filepath.Join(passableDir(t), "data")
	// --slurm-work-dir= (empty): the default, DATA/slurm.
	srv := startSlurmServer(t, c, "--data", data, "--slurm-work-dir=", "--slurm-run-as", "nobody", "--max-retries", "0")
	alice := newAPI(t, srv.URL, "alice", "dev")

	id := submit(t, alice, map[string]any{"name": "as-nobody", "gpus": 2, "command": []string{"sh", "-c",
		`id -un; id -u; echo "$USER"; pwd; echo saved > "$GPUPORTAL_CHECKPOINT_DIR/step" && cat "$GPUPORTAL_CHECKPOINT_DIR/step"`}})
	if j := alice.waitState(id, 60*time.Second, "succeeded", "failed"); j.State != "succeeded" {
		t.Fatalf("job %s: %q\noutput: %q\n%s", j.State, j.Reason, jobLog(t, alice, id), c.logs())
	}
	jobDir := filepath.Join(data, "slurm", "jobs", strconv.FormatInt(id, 10))
	out := strings.TrimSpace(jobLog(t, alice, id))
	t.Logf("the job as Slurm ran it:\n%s", out)
	want := strings.Join([]string{"nobody", nobody.Uid, "nobody", jobDir, "saved"}, "\n")
	if out != want {
		t.Errorf("the job printed %q, want %q: nobody's name and user ID, in its job folder, its checkpoint written", out, want)
	}
	// The job's folder, its output and checkpoint are nobody's and
	// private, as an agent's job folders are.
	for _, p := range []string{jobDir, filepath.Join(jobDir, "checkpoint"), filepath.Join(jobDir, "output.log"), filepath.Join(jobDir, "checkpoint", "step")} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Error(err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if strconv.Itoa(int(st.Uid)) != nobody.Uid {
			t.Errorf("%s belongs to user %d, want nobody (%s)", p, st.Uid, nobody.Uid)
		}
		if fi.IsDir() && fi.Mode().Perm() != 0o700 {
			t.Errorf("%s has mode %v, want 0700", p, fi.Mode().Perm())
		}
	}
	// The folders above it let nobody pass, and read nothing of them.
	for _, p := range []string{data, filepath.Join(data, "slurm"), filepath.Join(data, "slurm", "jobs")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o001 == 0 || perm&0o006 != 0 {
			t.Errorf("%s has mode %v: want others to pass (o+x) and no more", p, perm)
		}
	}
}
