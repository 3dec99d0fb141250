package server

import "testing"

// TestIdleFlags: --idle-after and --idle-below take what a team's own
// rule takes (core/idle CheckAfter, CheckBelow), each error naming its
// flag.
func TestIdleFlags(t *testing.T) {
	checkServeFlags(t, []flagCase{
		{"defaults", nil, ""},
		{"no flags", []string{"--idle-after", "0"}, ""},
		{"shortest and longest", []string{"--idle-after", "1s", "--idle-below", "100"}, ""},
		{"a day", []string{"--idle-after", "24h", "--idle-below", "0.5"}, ""},
		{"under a second", []string{"--idle-after", "500ms"}, "--idle-after"},
		{"over a day", []string{"--idle-after", "25h"}, "--idle-after"},
		{"negative", []string{"--idle-after", "-1m"}, "--idle-after"},
		{"no threshold", []string{"--idle-below", "0"}, "--idle-below"},
		{"over 100%", []string{"--idle-below", "101"}, "--idle-below"},
	})
}
