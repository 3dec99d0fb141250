package models

import (
	"fmt"
	"strings"
)

// MaxNameLen is the longest user or team name: the width of their columns.
const MaxNameLen = 64

// CheckName reports what is wrong with name as the name of a user or a
// team, or nil: 1 to MaxNameLen letters, digits, dots, dashes and
// underscores, starting with a letter or a digit. Names appear in URLs,
// topics (team:NAME), file names and logs, so they are never trimmed or
// clipped: a name that does not fit is refused.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("is required")
	case len(name) > MaxNameLen:
		return fmt.Errorf("is %d characters long; at most %d", len(name), MaxNameLen)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%q begins or ends with white space", name)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			i > 0 && (r == '.' || r == '-' || r == '_')
		if !ok {
			return fmt.Errorf("%q: use letters, digits, '.', '-' and '_', starting with a letter or digit", name)
		}
	}
	return nil
}
