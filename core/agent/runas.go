package agent

import (
	"fmt"
	"os/user"
	"strconv"
	"syscall"
)

// runAs is the user that command jobs run as.
type runAs struct {
	name     string
	uid, gid int
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

// LookupUser resolves a user name to its account; errors name the user.
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

// lookupRunAs resolves the user jobs run as, for an agent running as
// euid. An empty name is the agent's own user, with nothing to switch.
func lookupRunAs(name string, euid int) (*runAs, error) {
	if name == "" {
		return nil, nil
	}
	u, err := LookupUser(name)
	if err != nil {
		return nil, err
	}
	uid, gid := u.UID, u.GID
	ra := &runAs{name: u.Name, uid: uid, gid: gid, home: u.Home}
	if uid == euid {
		return ra, nil
	}
	if euid != 0 {
		return nil, fmt.Errorf("run jobs as %q: the agent runs as user id %d and cannot switch users; run it as root or as %s", name, euid, name)
	}
	ra.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: u.Groups}
	return ra, nil
}
