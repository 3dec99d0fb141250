package integration

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Jobs run as the people who submit them (issue 17): the agent started
// with --run-as owner runs each job as its owner's Unix account, in a
// private folder; the Slurm executor passes the owner's uid and gid.

// needRootAccounts fails under CI, and skips elsewhere, unless the tests
// run as root: they create Unix accounts and run jobs as them.
func needRootAccounts(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI runs as root, and this test creates Unix accounts to run jobs as")
	}
	t.Skip("needs root: it creates Unix accounts and runs jobs as them")
}

// The Unix accounts and groups these tests use (gpt-*) are fixtures of
// the machine: made when absent, put in the groups a test needs, and kept
// afterwards (locked, no password, no home, no login shell). Removing them
// at the end would pull them from under another test binary running at the
// same time on the same machine (two checkouts, or a CI run beside a
// session), which then saw an account without its groups.

// unixGroup makes sure group name exists.
func unixGroup(t *testing.T, name string) {
	t.Helper()
	if _, err := user.LookupGroup(name); err == nil {
		return
	}
	out, err := exec.Command("groupadd", name).CombinedOutput()
	if _, lerr := user.LookupGroup(name); err != nil && lerr != nil {
		t.Fatalf("groupadd %s: %v: %s", name, err, out)
	}
}

// unixUser makes sure account name exists, with its own primary group and
// (at least) the supplementary groups named, and returns it.
func unixUser(t *testing.T, name string, groups ...string) *user.User {
	t.Helper()
	if _, err := user.Lookup(name); err != nil {
		args := []string{"--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", "--user-group"}
		out, err := exec.Command("useradd", append(args, name)...).CombinedOutput()
		if _, lerr := user.Lookup(name); err != nil && lerr != nil {
			t.Fatalf("useradd %s: %v: %s", name, err, out)
		}
	}
	if len(groups) > 0 {
		if out, err := exec.Command("usermod", "--append", "--groups", strings.Join(groups, ","), name).CombinedOutput(); err != nil {
			t.Fatalf("usermod --append --groups %s %s: %v: %s", strings.Join(groups, ","), name, err, out)
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// passableDir is a temporary folder that every account may pass through,
// as may its parents: a work folder for agents that switch users.
func passableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// portalUser creates a researcher of team vision on the server whose data
// folder is data, and returns an API client with a token of theirs.
func portalUser(t *testing.T, base, data, name string) *api {
	t.Helper()
	adminCLI(t, data, "create-user", "--name", name, "--role", "researcher", "--team", "vision")
	m := shownToken.FindStringSubmatch(adminCLI(t, data, "create-token", "--name", name))
	if m == nil {
		t.Fatalf("no token shown for %s", name)
	}
	return &api{t: t, base: base, token: m[1]}
}

// TestJobsRunAsTheirOwners: under agent --run-as owner, alice's job runs
// as her Unix account with her groups and writes its checkpoint folder;
// bob's job cannot read or write alice's job folder; a job whose owner has
// no account on the machine waits, saying so.
func TestJobsRunAsTheirOwners(t *testing.T) {
	needRootAccounts(t)
	unixGroup(t, "gpt-lab")
	alice := unixUser(t, "gpt-alice", "gpt-lab")
	unixUser(t, "gpt-bob")
	if _, err := user.Lookup("gpt-carol"); err == nil {
		t.Fatal("a Unix account gpt-carol exists: this test needs a user without one")
	}

	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--max-retries", "0")
	work := passableDir(t)
	startAgent(t, srv.URL, "gpu-07", "--run-as", "owner", "--work-dir", work)
	waitGPUs(t, srv.URL, 2)
	aliceAPI := portalUser(t, srv.URL, data, "gpt-alice")
	bobAPI := portalUser(t, srv.URL, data, "gpt-bob")
	carolAPI := portalUser(t, srv.URL, data, "gpt-carol")

	// A job of an owner without an account waits, and takes no GPU from
	// the others.
	carol := submit(t, carolAPI, map[string]any{"name": "homeless", "gpus": 1, "command": []string{"true"}})
	want := "gpt-carol has no Unix account on gpu-07"
	var cj jobView
	eventually(t, 30*time.Second, "carol's job to wait with the reason", func() bool {
		cj = carolAPI.job(carol)
		return cj.State == "queued" && strings.Contains(cj.Reason, want)
	})
	t.Logf("carol's job: %s, %q", cj.State, cj.Reason)
	if cj.Failures != 0 || cj.ExitCode != nil {
		t.Errorf("carol's job counts %d failures, exit %v: a missing account is not the job's fault", cj.Failures, cj.ExitCode)
	}

	aj := submit(t, aliceAPI, map[string]any{"name": "whoami", "gpus": 1, "command": []string{"sh", "-c",
		`id -un; id -Gn; touch "$GPUPORTAL_CHECKPOINT_DIR/x" && echo touched`}})
	if j := aliceAPI.waitState(aj, 30*time.Second, "succeeded", "failed"); j.State != "succeeded" {
		t.Fatalf("alice's job %s: %q\n%s", j.State, j.Reason, jobLog(t, aliceAPI, aj))
	}
	out := jobLog(t, aliceAPI, aj)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || lines[0] != "gpt-alice" ||
		lines[1] != "gpt-alice gpt-lab" || lines[2] != "touched" {
		t.Errorf("alice's job printed %q; want her account, her groups (gpt-alice gpt-lab) and its checkpoint written", out)
	}
	uid, _ := strconv.Atoi(alice.Uid)
	gid, _ := strconv.Atoi(alice.Gid)
	dir := filepath.Join(work, "jobs", strconv.FormatInt(aj, 10))
	for _, p := range []string{dir, filepath.Join(dir, "checkpoint"), filepath.Join(dir, "checkpoint", "x")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s belongs to %d:%d, want alice's %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
		if fi.IsDir() && fi.Mode().Perm() != 0o700 {
			t.Errorf("%s has mode %v, want 0700", p, fi.Mode().Perm())
		}
	}

	// bob's job tries alice's job folder: to list it, read her output,
	// write into and list her checkpoint folder.
	probe := fmt.Sprintf(`d=%s
ls "$d" && echo LIST-OK
cat "$d/output.log" && echo READ-OK
touch "$d/checkpoint/y" && echo WRITE-OK
ls "$d/checkpoint" && echo LIST-CHECKPOINT-OK
echo probed`, dir)
	bj := submit(t, bobAPI, map[string]any{"name": "snoop", "gpus": 1, "command": []string{"sh", "-c", probe}})
	if j := bobAPI.waitState(bj, 30*time.Second, "succeeded", "failed"); j.State != "succeeded" {
		t.Fatalf("bob's job %s: %q\n%s", j.State, j.Reason, jobLog(t, bobAPI, bj))
	}
	bout := jobLog(t, bobAPI, bj)
	t.Logf("bob's job:\n%s", bout)
	if strings.Contains(bout, "-OK") || strings.Count(bout, "Permission denied") != 4 || !strings.Contains(bout, "probed") {
		t.Errorf("bob's job reached alice's folder, or was not refused four times:\n%s", bout)
	}
	if _, err := os.Lstat(filepath.Join(dir, "checkpoint", "y")); err == nil {
		t.Error("bob's job wrote into alice's checkpoint folder")
	}
	// alice's next job swaps its output for a link to a file only root
	// may read: the agent, which runs as root, never follows it.
	swap := submit(t, aliceAPI, map[string]any{"name": "swap", "gpus": 1, "command": []string{"sh", "-c",
		`echo before; sleep 1.5; rm output.log; ln -s /etc/shadow output.log; sleep 1.5; echo after`}})
	aliceAPI.waitState(swap, 30*time.Second, "succeeded", "failed")
	// Its output ends where it swapped it: nothing of /etc/shadow.
	if sout := jobLog(t, aliceAPI, swap); strings.TrimSpace(sout) != "before" {
		t.Errorf("a job that swapped its output for a link to /etc/shadow shows %q, want only %q", sout, "before")
	}

	// dave signs in as "gpt-dave" but his Unix account, set by an admin,
	// is gpt-bob: his job runs as gpt-bob (models.Store.UnixNames).
	daveAPI := portalUser(t, srv.URL, data, "gpt-dave")
	adminCLI(t, data, "set-unix-name", "--name", "gpt-dave", "--unix-name", "gpt-bob")
	dj := submit(t, daveAPI, map[string]any{"name": "whoami", "gpus": 1, "command": []string{"id", "-un"}})
	if j := daveAPI.waitState(dj, 30*time.Second, "succeeded", "failed"); j.State != "succeeded" {
		t.Fatalf("dave's job %s: %q\n%s", j.State, j.Reason, jobLog(t, daveAPI, dj))
	}
	if out := strings.TrimSpace(jobLog(t, daveAPI, dj)); out != "gpt-bob" {
		t.Errorf("dave's job ran as %q; want gpt-bob, the Unix account an admin set for him", out)
	}

	// carol still waits, and has not been started elsewhere.
	cj = carolAPI.job(carol)
	t.Logf("carol's job later: %s, %q", cj.State, cj.Reason)
	if cj.State != "queued" || !strings.Contains(cj.Reason, want) {
		t.Errorf("carol's job: %s, %q; want it still waiting with %q", cj.State, cj.Reason, want)
	}
}

// TestJobsRunAsOneServiceAccount: --run-as USER, for labs with one
// service account, runs command jobs as it, able to write their
// checkpoint folders (the agent made WORK/jobs 0750 root:root, and every
// such job failed with "permission denied").
func TestJobsRunAsOneServiceAccount(t *testing.T) {
	needRootAccounts(t)
	unixUser(t, "gpt-svc")
	srv := startAgentServer(t, "--data", t.TempDir(), "--max-retries", "0")
	startAgent(t, srv.URL, "gpu-09", "--run-as", "gpt-svc", "--work-dir", passableDir(t))
	waitGPUs(t, srv.URL, 2)
	a := newAPI(t, srv.URL, "alice", "dev")
	id := submit(t, a, map[string]any{"name": "svc", "gpus": 1, "command": []string{"sh", "-c",
		`id -un; touch "$GPUPORTAL_CHECKPOINT_DIR/x" && echo touched`}})
	j := a.waitState(id, 30*time.Second, "succeeded", "failed")
	if out := strings.TrimSpace(jobLog(t, a, id)); j.State != "succeeded" || out != "gpt-svc\ntouched" {
		t.Errorf("job %s, output %q; want it run as gpt-svc, able to write its checkpoint folder", j.State, out)
	}
}

// TestSlurmRunsJobsAsTheirOwners: with --slurm-run-as owner, Slurm runs a
// job as its owner's Unix account, with the account's own group (sbatch
// --uid and --gid; with --uid alone the job kept root's group), in a job
// folder of its own.
func TestSlurmRunsJobsAsTheirOwners(t *testing.T) {
	needRootAccounts(t)
	unixGroup(t, "gpt-lab")
	alice := unixUser(t, "gpt-alice", "gpt-lab")
	c := startSlurm(t)
	// alice's job passes through the cluster's folder to its work folder.
	if err := os.Chmod(c.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	srv := startSlurmServer(t, c, "--data", data, "--slurm-run-as", "owner", "--max-retries", "0")
	a := portalUser(t, srv.URL, data, "gpt-alice")
	id := submit(t, a, map[string]any{"name": "ids", "gpus": 1, "command": []string{"sh", "-c",
		`id -u; id -g; id -Gn; touch "$GPUPORTAL_CHECKPOINT_DIR/x" && echo touched`}})
	if j := a.waitState(id, 60*time.Second, "succeeded", "failed"); j.State != "succeeded" {
		t.Fatalf("job %s: %q\n%s", j.State, j.Reason, jobLog(t, a, id))
	}
	out := strings.TrimSpace(jobLog(t, a, id))
	t.Logf("the job as Slurm ran it:\n%s", out)
	want := strings.Join([]string{alice.Uid, alice.Gid, "gpt-alice gpt-lab", "touched"}, "\n")
	if out != want {
		t.Errorf("the job printed %q, want %q: alice's user and group IDs, her groups, its checkpoint written", out, want)
	}
	fi, err := os.Stat(filepath.Join(c.dir, "work", "jobs", strconv.FormatInt(id, 10)))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); strconv.Itoa(int(st.Uid)) != alice.Uid || fi.Mode().Perm() != 0o700 {
		t.Errorf("the job folder belongs to %d with mode %v, want alice's, 0700", st.Uid, fi.Mode().Perm())
	}
}
