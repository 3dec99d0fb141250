package agent

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/gpuportal/gpuportal/core/job"
)

// RunAsOwner is Config.RunAs (agent --run-as owner) for running each
// command job as its owner's Unix account (job.Spec.Account), looked up
// on the machine at each start as slurmd does: user ID, primary group and
// supplementary groups. It needs the agent to run as root.
const RunAsOwner = "owner"

// DefaultMinUID is the lowest user ID a job's owner may have under
// --run-as owner: below it are the system's own accounts (daemon, www-data,
// postgres, ...), which a portal user of the same name must not become.
const DefaultMinUID = 1000

// runAs is the user that command jobs run as.
type runAs struct {
	name     string
	uid, gid int
	groups   []uint32 // every group the user is in, the primary one too
	home     string
	// cred switches to the user; nil when the agent already runs as it.
	cred *syscall.Credential
}

// User is a local account jobs may run as.
type User struct {
	Name     string
	UID, GID int
	Groups   []uint32 // supplementary groups
	Home     string
}

// LookupUser resolves a user name to its account through the machine's
// name service (os/user: /etc/passwd, or LDAP and SSSD through NSS when
// built with cgo); errors name the user, and an account that does not
// exist is a user.UnknownUserError.
func LookupUser(name string) (User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return User{}, fmt.Errorf("run jobs as %q: %w", name, err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return User{}, fmt.Errorf("run jobs as %q: user id %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return User{}, fmt.Errorf("run jobs as %q: group id %q: %w", name, u.Gid, err)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return User{}, fmt.Errorf("run jobs as %q: groups: %w", name, err)
	}
	groups := make([]uint32, 0, len(ids))
	for _, g := range ids {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return User{}, fmt.Errorf("run jobs as %q: group id %q: %w", name, g, err)
		}
		groups = append(groups, uint32(n))
	}
	return User{Name: u.Username, UID: uid, GID: gid, Groups: groups, Home: u.HomeDir}, nil
}

// newRunAs is the user u as jobs run as it, for an agent running as euid.
func newRunAs(u User, euid int) *runAs {
	groups := slices.Clone(u.Groups)
	if !slices.Contains(groups, uint32(u.GID)) {
		groups = append(groups, uint32(u.GID))
	}
	ra := &runAs{name: u.Name, uid: u.UID, gid: u.GID, groups: groups, home: u.Home}
	if u.UID != euid {
		ra.cred = &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: u.Groups}
	}
	return ra
}

// lookupRunAs resolves the one user jobs run as (--run-as USER), for an
// agent running as euid. An empty name is the agent's own user, with
// nothing to switch; RunAsOwner is resolved per job (ownerRunAs).
func lookupRunAs(name string, euid int) (*runAs, error) {
	if name == "" {
		return nil, nil
	}
	if name == RunAsOwner {
		if euid != 0 {
			return nil, fmt.Errorf("--run-as %s: the agent runs as user id %d and cannot switch to jobs' owners; run it as root", RunAsOwner, euid)
		}
		return nil, nil
	}
	u, err := LookupUser(name)
	if err != nil {
		return nil, err
	}
	if u.UID != euid && euid != 0 {
		return nil, fmt.Errorf("run jobs as %q: the agent runs as user id %d and cannot switch users; run it as root or as %s", name, euid, name)
	}
	return newRunAs(u, euid), nil
}

// owners reports whether the agent runs each job as its owner.
func (a *Local) owners() bool { return a.cfg.RunAs == RunAsOwner }

// jobRunAs is the user command job s runs as: the agent's --run-as user
// (nil: its own), or under --run-as owner the owner's account, which
// must exist on this machine and may not be a system account, nor root
// unless Config.AllowRootOwner. A refusal for the account is a
// *job.AccountError, so the server waits the job for another machine.
func (a *Local) jobRunAs(s job.Spec) (*runAs, error) {
	if !a.owners() || (len(s.Command) == 0 && s.Session == nil) {
		return a.runAs, nil
	}
	if s.Account == "" {
		return nil, fmt.Errorf("the agent runs jobs as their owners (--run-as %s) and the server did not say whose job %d is: upgrade the server", RunAsOwner, s.JobID)
	}
	refuse := func(why string) error { return &job.AccountError{Account: s.Account, Node: a.cfg.Name, Why: why} }
	if !ValidAccountName(s.Account) {
		return nil, refuse("it is not an account name (no '/', ':', spaces or control characters, not starting with '-', at most 256 bytes)")
	}
	u, err := a.lookup(s.Account)
	var unknown user.UnknownUserError
	switch {
	case errors.As(err, &unknown):
		return nil, refuse("")
	case err != nil:
		return nil, fmt.Errorf("look up the Unix account of job %d's owner: %w", s.JobID, err)
	case u.UID == 0 && !a.cfg.AllowRootOwner:
		return nil, refuse("it is root, and the agent runs no job as root without --allow-root-owner")
	case u.UID != 0 && u.UID < a.minUID():
		return nil, refuse(fmt.Sprintf("its user id %d is below the agent's --min-uid %d (a system account)", u.UID, a.minUID()))
	}
	ra := newRunAs(u, a.euid)
	if dir, mode, ok := blockedFor(filepath.Join(a.cfg.WorkDir, "jobs"), ra); !ok {
		return nil, fmt.Errorf("job %d: %s cannot pass through %s (mode %04o): let others pass through it (chmod o+x) or choose another --work-dir", s.JobID, ra.name, dir, mode)
	}
	return ra, nil
}

// folderRunAs is who job s's folder is made for, ra being who it runs as:
// ra, but a simulated job under --run-as owner, which runs nothing, gets
// its folder made for its owner's account where the machine has it, as
// DialFiles serves every job's files as that account (a folder of the
// agent's own, root's, was "permission denied to the job's account" on
// the job's page).
func (a *Local) folderRunAs(s job.Spec, ra *runAs) *runAs {
	if !a.owners() || len(s.Command) > 0 || s.Session != nil || s.Account == "" {
		return ra
	}
	s.Command = []string{FilesCommand}
	owner, err := a.jobRunAs(s)
	if err != nil {
		// It runs all the same; its files are not readable as the owner.
		return ra
	}
	return owner
}

// ValidAccountName reports whether name can name an account in the name
// service: permissive (directories allow "alice@lab.example"), but never
// a path, a passwd field separator, white space or an option.
func ValidAccountName(name string) bool {
	if name == "" || len(name) > 256 || name[0] == '-' || name == "." || name == ".." {
		return false
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || r == '/' || r == ':' {
			return false
		}
	}
	return true
}

func (a *Local) minUID() int {
	if a.cfg.MinUID > 0 {
		return a.cfg.MinUID
	}
	return DefaultMinUID
}

// blockedFor finds the first folder from / down to dir that ra may not
// pass through (search permission, as the kernel checks it for its user
// and groups); ok when there is none.
func blockedFor(dir string, ra *runAs) (blocked string, mode os.FileMode, ok bool) {
	var chain []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		chain = append(chain, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		fi, err := os.Stat(chain[i])
		if err != nil {
			continue // not there yet: creating it will say why
		}
		st, isUnix := fi.Sys().(*syscall.Stat_t)
		if !isUnix || ra.uid == 0 {
			continue
		}
		perm := fi.Mode().Perm()
		var can bool
		switch {
		case int(st.Uid) == ra.uid:
			can = perm&0o100 != 0
		case slices.Contains(ra.groups, st.Gid):
			can = perm&0o010 != 0
		default:
			can = perm&0o001 != 0
		}
		if !can {
			return chain[i], perm, false
		}
	}
	return "", 0, true
}

// CheckJobDirMode checks a job folder's mode (agent --job-dir-mode): the
// owner reads, writes and enters it, its group may be given access (team
// sharing, with the setgid bit to keep the group on new files), and
// others get nothing.
func CheckJobDirMode(mode os.FileMode) error {
	switch {
	case mode&^(os.ModePerm|os.ModeSetgid) != 0:
		return fmt.Errorf("%04o: only permission bits and setgid (02000)", uint32(mode))
	case mode.Perm()&0o700 != 0o700:
		return fmt.Errorf("%04o: the job's own account needs rwx (07..)", uint32(mode.Perm()))
	case mode.Perm()&0o007 != 0:
		return fmt.Errorf("%04o: other accounts' jobs must not reach a job's folder (the last digit must be 0)", uint32(mode.Perm()))
	}
	return nil
}

// ParseJobDirMode reads an octal mode such as 0750 or 2770 into an
// os.FileMode (setgid as os.ModeSetgid) and checks it.
func ParseJobDirMode(s string) (os.FileMode, error) {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("%q: want an octal mode such as 0700 or 0750", s)
	}
	mode := os.FileMode(n & 0o777)
	if n&0o2000 != 0 {
		mode |= os.ModeSetgid
	}
	if n&^0o2777 != 0 {
		return 0, fmt.Errorf("%q: only permission bits and setgid (02000)", s)
	}
	return mode, CheckJobDirMode(mode)
}
