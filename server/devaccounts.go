package server

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuportal/gpuportal/core/agent"
)

// devAccounts gives each user of serve --dev, run as root, a throwaway
// Unix account of their own for their jobs (gpd-NAME, made on first use,
// its home under the data folder), so that one user's job cannot read
// another's processes, files or session tokens, as it could when every
// job ran as nobody. The built-in agents run jobs as their owners with
// it (agent.Config.Owners).
type devAccounts struct {
	homes string // the folder of the accounts' homes
	group int    // devJobsGroup's ID (setup)
	log   *slog.Logger
	mu    sync.Mutex // one useradd at a time
}

// devAccountPrefix starts every account devAccounts makes, apart from
// the machine's own accounts.
const devAccountPrefix = "gpd-"

// devJobsGroup is the group of every account devAccounts makes: the data
// folder lets its members, and no one else, pass to their jobs' folders
// (passJobs).
const devJobsGroup = devAccountPrefix + "jobs"

// devAccountName is the account of portal account name: gpd- and the name
// as useradd takes it (lower case letters, digits, '-' and '_', at most
// 32 bytes); a name changed to fit gets a piece of its hash, so that two
// names never share an account.
func devAccountName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	clean := b.String()
	if clean == name && len(devAccountPrefix)+len(clean) <= 32 {
		return devAccountPrefix + clean
	}
	sum := sha256.Sum256([]byte(name))
	tag := hex.EncodeToString(sum[:4])
	if room := 32 - len(devAccountPrefix) - 1 - len(tag); len(clean) > room {
		clean = clean[:room]
	}
	return devAccountPrefix + clean + "-" + tag
}

// lookup is agent.Config.Owners: the throwaway account of the job's
// owner, made when missing.
func (d *devAccounts) lookup(owner string) (agent.User, error) {
	name := devAccountName(owner)
	d.mu.Lock()
	defer d.mu.Unlock()
	u, err := agent.LookupUser(name)
	var unknown user.UnknownUserError
	if err != nil && !errors.As(err, &unknown) {
		return agent.User{}, err
	}
	home := filepath.Join(d.homes, name)
	if err != nil {
		out, err := exec.Command("useradd", "--no-create-home", "--home-dir", home, "--shell", "/usr/sbin/nologin",
			"--user-group", "--groups", devJobsGroup, "--comment", "gpuportal serve --dev, jobs of "+strings.Map(commentRune, owner), name).CombinedOutput()
		if err != nil {
			return agent.User{}, fmt.Errorf("make the account %s for %s's jobs: %w: %s", name, owner, err, strings.TrimSpace(string(out)))
		}
		d.log.Info("made a Unix account for a user's jobs", "user", owner, "account", name)
		if u, err = agent.LookupUser(name); err != nil {
			return agent.User{}, err
		}
	}
	if !slices.Contains(u.Groups, uint32(d.group)) {
		// An account an earlier version made, before the group.
		if out, err := exec.Command("usermod", "--append", "--groups", devJobsGroup, name).CombinedOutput(); err != nil {
			return agent.User{}, fmt.Errorf("add %s to %s: %w: %s", name, devJobsGroup, err, strings.TrimSpace(string(out)))
		}
		if u, err = agent.LookupUser(name); err != nil {
			return agent.User{}, err
		}
	}
	// The home is made anew after the data folder was removed.
	if err := os.Mkdir(home, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return agent.User{}, fmt.Errorf("home of %s: %w", name, err)
	}
	if err := os.Chown(home, u.UID, u.GID); err != nil {
		return agent.User{}, fmt.Errorf("home of %s: %w", name, err)
	}
	u.Home = home
	return u, nil
}

// setup makes devJobsGroup when missing, and makes the data folder's
// dirs passable by its members alone (root:gpd-jobs, 0710): other local
// accounts cannot even reach what the folder holds.
func (d *devAccounts) setup(dirs ...string) error {
	g, err := user.LookupGroup(devJobsGroup)
	var unknown user.UnknownGroupError
	if errors.As(err, &unknown) {
		out, aerr := exec.Command("groupadd", "--system", devJobsGroup).CombinedOutput()
		if aerr != nil && !strings.Contains(string(out), "already exists") {
			return fmt.Errorf("make the group %s for jobs' accounts: %w: %s", devJobsGroup, aerr, strings.TrimSpace(string(out)))
		}
		g, err = user.LookupGroup(devJobsGroup)
	}
	if err != nil {
		return fmt.Errorf("group %s: %w", devJobsGroup, err)
	}
	if d.group, err = strconv.Atoi(g.Gid); err != nil {
		return fmt.Errorf("group %s: id %q: %w", devJobsGroup, g.Gid, err)
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("data folder: %w", err)
		}
		if err := os.Chown(dir, 0, d.group); err != nil {
			return fmt.Errorf("let jobs' accounts pass through %s: %w", dir, err)
		}
		if err := os.Chmod(dir, 0o710); err != nil {
			return fmt.Errorf("let jobs' accounts pass through %s: %w", dir, err)
		}
	}
	return nil
}

// passOnly makes folder dir, and makes it passable by every account
// (so that jobs reach their own folders below it) but readable by its
// owner alone: 0711.
func passOnly(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return fmt.Errorf("let jobs' accounts pass through %s: %w", dir, err)
	}
	return nil
}

// commentRune keeps r in a passwd comment field, which takes no ':',
// ',' or control characters.
func commentRune(r rune) rune {
	if r < ' ' || r == 0x7f || r == ':' || r == ',' {
		return '_'
	}
	return r
}
