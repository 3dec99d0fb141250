package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/joboutput"
)

// needRoot skips a test that changes files' owners unless it runs as
// root; under CI it fails instead, since CI runs as root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test changes files' owners and needs root, which CI runs as")
	}
	t.Skip("needs root")
}

// openTempDir is a temporary folder that everyone may pass through, as
// may the folder t.TempDir puts it in.
func openTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fakeAccounts is a machine's accounts for jobRunAs.
func fakeAccounts(us ...User) func(string) (User, error) {
	return func(name string) (User, error) {
		for _, u := range us {
			if u.Name == name {
				return u, nil
			}
		}
		return User{}, fmt.Errorf("run jobs as %q: %w", name, user.UnknownUserError(name))
	}
}

// TestJobRunAs: under --run-as owner, who a command job runs as, and
// which owners' jobs a machine refuses, with what words.
func TestJobRunAs(t *testing.T) {
	accounts := fakeAccounts(
		User{Name: "alice", UID: 1001, GID: 1001, Groups: []uint32{1001, 3000}, Home: "/home/alice"},
		User{Name: "root", UID: 0, GID: 0, Groups: []uint32{0}, Home: "/root"},
		User{Name: "postgres", UID: 113, GID: 120, Home: "/var/lib/postgresql"},
	)
	cmd := []string{"true"}
	tests := []struct {
		name      string
		cfg       Config
		spec      job.Spec
		wantUser  string // "" with no error: the agent's own
		wantGroup []uint32
		wantErr   string
		refusal   bool // the error is a *job.AccountError
	}{
		{"the owner's account, groups and all", Config{RunAs: RunAsOwner}, job.Spec{JobID: 1, Command: cmd, Account: "alice"},
			"alice", []uint32{1001, 3000}, "", false},
		{"no account on the machine", Config{RunAs: RunAsOwner}, job.Spec{JobID: 1, Command: cmd, Account: "bob"},
			"", nil, "bob has no Unix account on n0", true},
		{"root is refused", Config{RunAs: RunAsOwner}, job.Spec{JobID: 1, Command: cmd, Account: "root"},
			"", nil, "root's Unix account on n0 may not run jobs: it is root, and the agent runs no job as root without --allow-root-owner", true},
		{"root is allowed when the operator says so", Config{RunAs: RunAsOwner, AllowRootOwner: true}, job.Spec{JobID: 1, Command: cmd, Account: "root"},
			"root", []uint32{0}, "", false},
		{"a system account is refused", Config{RunAs: RunAsOwner}, job.Spec{JobID: 1, Command: cmd, Account: "postgres"},
			"", nil, "its user id 113 is below the agent's --min-uid 1000 (a system account)", true},
		{"a lower --min-uid lets it run", Config{RunAs: RunAsOwner, MinUID: 100}, job.Spec{JobID: 1, Command: cmd, Account: "postgres"},
			"postgres", []uint32{120}, "", false},
		{"a server that does not say whose job it is", Config{RunAs: RunAsOwner}, job.Spec{JobID: 1, Command: cmd},
			"", nil, "did not say whose job 1 is", false},
		{"not an account name", Config{RunAs: RunAsOwner}, job.Spec{JobID: 1, Command: cmd, Account: "../etc"},
			"", nil, "it is not an account name", true},
		{"an option", Config{RunAs: RunAsOwner}, job.Spec{JobID: 1, Command: cmd, Account: "-alice"},
			"", nil, "it is not an account name", true},
		{"a directory's qualified name is looked up", Config{RunAs: RunAsOwner}, job.Spec{JobID: 1, Command: cmd, Account: "alice@lab.example"},
			"", nil, "alice@lab.example has no Unix account on n0", true},
		{"a simulated job runs nothing", Config{RunAs: RunAsOwner}, job.Spec{JobID: 1, Account: "bob"},
			"", nil, "", false},
		{"one service account: the owner is ignored", Config{}, job.Spec{JobID: 1, Command: cmd, Account: "bob"},
			"", nil, "", false},
	}
	work := openTempDir(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name, tc.cfg.WorkDir = "n0", work
			a := &Local{cfg: tc.cfg, euid: 0, lookup: accounts}
			ra, err := a.jobRunAs(tc.spec)
			var ae *job.AccountError
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want one with %q", err, tc.wantErr)
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err %v", err)
			case errors.As(err, &ae) != tc.refusal || errors.Is(err, job.ErrNoAccount) != tc.refusal:
				t.Fatalf("err %v: refusal %v, want %v", err, !tc.refusal, tc.refusal)
			}
			got := ""
			if ra != nil {
				got = ra.name
			}
			if got != tc.wantUser {
				t.Fatalf("runs as %q, want %q", got, tc.wantUser)
			}
			if ra == nil {
				return
			}
			for _, g := range tc.wantGroup {
				if !slices.Contains(ra.groups, g) {
					t.Errorf("groups %v, want %d among them", ra.groups, g)
				}
			}
			if ra.uid != 0 && (ra.cred == nil || int(ra.cred.Uid) != ra.uid || int(ra.cred.Gid) != ra.gid) {
				t.Errorf("credential %+v, want the account's user and group", ra.cred)
			}
		})
	}
}

func TestParseJobDirMode(t *testing.T) {
	tests := []struct {
		in      string
		want    os.FileMode
		wantErr string
	}{
		{"0700", 0o700, ""},
		{"0750", 0o750, ""},
		{"2770", 0o770 | os.ModeSetgid, ""},
		{"0755", 0, "the last digit must be 0"},
		{"0701", 0, "the last digit must be 0"},
		{"0500", 0, "needs rwx"},
		{"4700", 0, "only permission bits and setgid"},
		{"u=rwx", 0, "want an octal mode"},
	}
	for _, tc := range tests {
		got, err := ParseJobDirMode(tc.in)
		switch {
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %v, %v; want %v", tc.in, got, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: err %v, want one with %q", tc.in, err, tc.wantErr)
		}
	}
}

// TestBlockedFor: the kernel's search permission, for a user and groups.
func TestBlockedFor(t *testing.T) {
	needRoot(t)
	root := openTempDir(t)
	mk := func(name string, mode os.FileMode, uid, gid int) string {
		p := filepath.Join(root, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	alice := &runAs{name: "alice", uid: 51001, gid: 51001, groups: []uint32{51001, 53000}}
	tests := []struct {
		name string
		dir  string
		ok   bool
	}{
		{"others may pass", mk("open", 0o711, 0, 0), true},
		{"closed to others", mk("closed", 0o700, 0, 0), false},
		{"its owner passes", mk("own", 0o700, 51001, 0), true},
		{"a group of the user's passes", mk("group", 0o710, 0, 53000), true},
		{"a group that is not the user's", mk("other-group", 0o710, 0, 54000), false},
	}
	for _, tc := range tests {
		inner := filepath.Join(tc.dir, "jobs")
		if err := os.Mkdir(inner, 0o711); err != nil {
			t.Fatal(err)
		}
		blocked, _, ok := blockedFor(inner, alice)
		if ok != tc.ok || !ok && blocked != tc.dir {
			t.Errorf("%s: blocked at %q (ok %v), want ok %v", tc.name, blocked, ok, tc.ok)
		}
	}
}

// TestPrivateJobFolders: a job's folder and checkpoint folder belong to
// its account with the configured mode, stay the same across runs, and a
// link or FIFO the job puts in its folder is never followed.
func TestPrivateJobFolders(t *testing.T) {
	needRoot(t)
	for _, mode := range []os.FileMode{0o700, 0o750 | os.ModeSetgid} {
		t.Run(mode.String(), func(t *testing.T) {
			work := t.TempDir()
			a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 1, 1024), WorkDir: work, JobDirMode: mode}, make(chan job.Exit, 1))
			if err != nil {
				t.Fatal(err)
			}
			ra := newRunAs(User{Name: "alice", UID: 51001, GID: 52001, Groups: []uint32{52001}}, 0)
			for run := 1; run <= 2; run++ {
				f, err := a.openJobDir(7, ra)
				if err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				fmt.Fprintf(f, "run %d\n", run)
				f.Close()
				for _, p := range []string{a.jobDir(7), a.CheckpointDir(7), a.LogPath(7)} {
					fi, err := os.Lstat(p)
					if err != nil {
						t.Fatal(err)
					}
					st := fi.Sys().(*syscall.Stat_t)
					if st.Uid != 51001 || st.Gid != 52001 {
						t.Errorf("run %d: %s belongs to %d:%d, want 51001:52001", run, p, st.Uid, st.Gid)
					}
					want := mode
					if p == a.LogPath(7) {
						want = mode.Perm() & 0o660
					}
					if got := fi.Mode() &^ os.ModeDir; got != want {
						t.Errorf("run %d: %s has mode %v, want %v", run, p, got, want)
					}
				}
			}
			if out, _ := os.ReadFile(a.LogPath(7)); string(out) != "run 1\nrun 2\n" {
				t.Errorf("output %q, want both runs' lines", out)
			}
			// The job swaps its checkpoint folder for a link to a folder of
			// the agent's, and its output for a link to a file of root's.
			secret := filepath.Join(work, "secret")
			if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
				t.Fatal(err)
			}
			os.RemoveAll(a.CheckpointDir(7))
			if err := os.Symlink(work, a.CheckpointDir(7)); err != nil {
				t.Fatal(err)
			}
			if _, err := a.openJobDir(7, ra); err == nil || !strings.Contains(err.Error(), "not a folder") {
				t.Errorf("checkpoint folder is a link: err %v, want a refusal", err)
			}
			if fi, _ := os.Stat(work); fi.Sys().(*syscall.Stat_t).Uid != 0 {
				t.Error("the link's target changed owner")
			}
			os.Remove(a.CheckpointDir(7))
			os.Remove(a.LogPath(7))
			if err := os.Symlink(secret, a.LogPath(7)); err != nil {
				t.Fatal(err)
			}
			if _, err := a.openJobDir(7, ra); err == nil {
				t.Error("output is a link: opened")
			}
			if f, err := joboutput.Open(a.LogPath(7)); err == nil {
				f.Close()
				t.Error("output is a link: read")
			}
			os.Remove(a.LogPath(7))
			if err := syscall.Mkfifo(a.LogPath(7), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := a.openJobDir(7, ra); err == nil {
				t.Error("output is a FIFO: opened")
			}
			if f, err := joboutput.Open(a.LogPath(7)); err == nil {
				f.Close()
				t.Error("output is a FIFO: read")
			}
			if fi, _ := os.Stat(secret); fi.Sys().(*syscall.Stat_t).Uid != 0 || fi.Mode().Perm() != 0o600 {
				t.Error("the link's target changed")
			}
		})
	}
}

// TestSimulatedJobFolderIsTheOwners: under --run-as owner a simulated
// job, which runs nothing, still gets its folder made for its owner's
// account, the one DialFiles serves its files as; an owner without an
// account on the machine leaves it the agent's, and the job runs.
func TestSimulatedJobFolderIsTheOwners(t *testing.T) {
	needRoot(t)
	work := openTempDir(t)
	exits := make(chan job.Exit, 4)
	a, err := New(Config{Name: "n0", Backend: gpu.NewSim("n0", 2, 1024), WorkDir: work, RunAs: RunAsOwner,
		Owners: fakeAccounts(User{Name: "alice", UID: 51001, GID: 52001, Groups: []uint32{52001}})}, exits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	})
	for _, tc := range []struct {
		name    string
		id      int64
		account string
		uid     uint32
	}{
		{"the owner's account", 1, "alice", 51001},
		{"no account on the machine", 2, "bob", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := a.Start(context.Background(), job.Spec{JobID: tc.id, Run: 1, SimRemaining: time.Hour, GPUs: []int{int(tc.id) - 1}, Account: tc.account}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{a.jobDir(tc.id), a.CheckpointDir(tc.id), a.LogPath(tc.id)} {
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != tc.uid {
					t.Errorf("%s belongs to %d, want %d", p, uid, tc.uid)
				}
			}
		})
	}
}
