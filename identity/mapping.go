package identity

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Roles a group may give, weakest first: a person with several gets the
// strongest.
var roles = []string{"researcher", "lead", "admin"}

// Rule maps one group to a team or a role: "group:ml-vision -> team
// vision", "group:vision-leads -> lead", "group:gpu-admins -> admin".
type Rule struct {
	Group string `json:"group"`
	// Team is the team the group's members belong to, or empty.
	Team string `json:"team,omitempty"`
	// Role is the role the group gives (researcher, lead, admin), or empty.
	Role string `json:"role,omitempty"`
}

// String writes the rule as ParseRule reads it.
func (r Rule) String() string {
	if r.Team != "" {
		return "group:" + r.Group + " -> team " + r.Team
	}
	return "group:" + r.Group + " -> " + r.Role
}

// ParseRule reads "group:GROUP -> team TEAM" or "group:GROUP -> ROLE".
func ParseRule(s string) (Rule, error) {
	lhs, rhs, ok := strings.Cut(s, "->")
	group, isGroup := strings.CutPrefix(strings.TrimSpace(lhs), "group:")
	rhs = strings.TrimSpace(rhs)
	if !ok || !isGroup || strings.TrimSpace(group) == "" || rhs == "" {
		return Rule{}, fmt.Errorf("mapping %q: want \"group:GROUP -> team TEAM\" or \"group:GROUP -> ROLE\"", s)
	}
	r := Rule{Group: strings.TrimSpace(group)}
	if team, isTeam := strings.CutPrefix(rhs, "team"); isTeam && (team == "" || team[0] == ' ') {
		r.Team = strings.TrimSpace(team)
		if r.Team == "" {
			return Rule{}, fmt.Errorf("mapping %q: give a team or a role, one of them", s)
		}
	} else {
		r.Role = rhs
	}
	return r, r.check()
}

func (r Rule) check() error {
	switch {
	case r.Group == "":
		return fmt.Errorf("mapping %v: no group", r)
	case (r.Team == "") == (r.Role == ""):
		return fmt.Errorf("mapping of group %s: give a team or a role, one of them", r.Group)
	case r.Role != "" && !slices.Contains(roles, r.Role):
		return fmt.Errorf("mapping %v: unknown role %q: want %s", r, r.Role, strings.Join(roles, ", "))
	case strings.ContainsAny(r.Team, " \t"):
		return fmt.Errorf("mapping %v: a team name has no spaces", r)
	}
	return nil
}

// Mapping turns a person's groups into their role and team.
type Mapping struct {
	Rules []Rule `json:"rules"`
	// DefaultTeam is the team of people none of whose groups names one;
	// empty: they may not sign in (unless a group makes them admin).
	DefaultTeam string `json:"default_team,omitempty"`
}

// ErrNoTeam: none of the person's groups gives a team, and there is no
// default team.
var ErrNoTeam = errors.New("no group gives a team")

// Resolve returns the role and team that groups give: the team of the
// first rule, in the configured order, whose group the person is in
// (else DefaultTeam), and the strongest role of their groups (else
// researcher). An admin needs no team.
func (m Mapping) Resolve(groups []string) (role, team string, err error) {
	role = roles[0]
	for _, r := range m.Rules {
		if !slices.Contains(groups, r.Group) {
			continue
		}
		if r.Team != "" && team == "" {
			team = r.Team
		}
		if slices.Index(roles, r.Role) > slices.Index(roles, role) {
			role = r.Role
		}
	}
	if team == "" {
		team = m.DefaultTeam
	}
	if team == "" && role != "admin" {
		return "", "", fmt.Errorf("groups %s: %w", listOrNone(groups), ErrNoTeam)
	}
	return role, team, nil
}

func listOrNone(groups []string) string {
	if len(groups) == 0 {
		return "(none)"
	}
	return strings.Join(groups, ", ")
}
