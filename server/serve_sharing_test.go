package server

import (
	"io"
	"strings"
	"testing"
)

// TestServeSharePlacementFlag: serve's --share-placement defaults to
// free-first, takes fullest-first, and refuses anything else by name.
func TestServeSharePlacementFlag(t *testing.T) {
	tests := []struct {
		args []string
		want string // the rule, or a piece of the error
		err  bool
	}{
		{nil, "free-first", false},
		{[]string{"--share-placement", "fullest-first"}, "fullest-first", false},
		{[]string{"--share-placement", "emptiest"}, `--share-placement "emptiest"`, true},
	}
	for _, tc := range tests {
		f, err := parseServeFlags(tc.args, io.Discard)
		switch {
		case tc.err && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want one with %q", tc.args, err, tc.want)
		case !tc.err && (err != nil || f.sharePlacement != tc.want):
			t.Errorf("%v: %q, %v; want %q", tc.args, f.sharePlacement, err, tc.want)
		}
	}
}
