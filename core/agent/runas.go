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

// lookupRunAs resolves the user jobs run as, for an agent running as
// euid. An empty name is the agent's own user, with nothing to switch.
func lookupRunAs(name string, euid int) (*runAs, error) {
	if name == "" {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("run jobs as %q: %w", name, err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return nil, fmt.Errorf("run jobs as %q: user id %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return nil, fmt.Errorf("run jobs as %q: group id %q: %w", name, u.Gid, err)
	}
	ra := &runAs{name: u.Username, uid: uid, gid: gid, home: u.HomeDir}
	if uid == euid {
		return ra, nil
	}
	if euid != 0 {
		return nil, fmt.Errorf("run jobs as %q: the agent runs as user id %d and cannot switch users; run it as root or as %s", name, euid, name)
	}
	groups, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("run jobs as %q: groups: %w", name, err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	for _, g := range groups {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("run jobs as %q: group id %q: %w", name, g, err)
		}
		cred.Groups = append(cred.Groups, uint32(n))
	}
	ra.cred = cred
	return ra, nil
}
