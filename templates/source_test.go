package templates

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// tag is an HTML tag on a line of templ source.
	tag = regexp.MustCompile(`<[^>]*>`)
	// call is a component call: templ renders it only where it starts a
	// run of text; after other text it is printed as it is.
	call = regexp.MustCompile(`@[A-Za-z_][A-Za-z0-9_.]*\(`)
	// quotedExpr is a templ expression inside a quoted attribute value,
	// which templ prints as it is: attr={ x } is the form that works.
	quotedExpr = regexp.MustCompile(`=["'][^"']*\{ `)
)

// sourceMistakes returns the places in one templ file where templ would
// print template source as text instead of running it.
func sourceMistakes(src string) []string {
	var out []string
	for i, line := range strings.Split(src, "\n") {
		if quotedExpr.MatchString(line) {
			out = append(out, fmt.Sprintf("line %d: an expression inside quotes: %s", i+1, strings.TrimSpace(line)))
		}
		for _, text := range tag.Split(line, -1) {
			text = strings.TrimSpace(text)
			if loc := call.FindStringIndex(text); loc != nil && loc[0] > 0 {
				out = append(out, fmt.Sprintf("line %d: a component call after text: %s", i+1, strings.TrimSpace(line)))
			}
		}
	}
	return out
}

func TestSourceMistakes(t *testing.T) {
	cases := []struct {
		name, src string
		bad       bool
	}{
		{"a call on its own line runs", "<label>\n\tTeam\n\t@teamSelect(a.Teams)\n</label>", false},
		{"a call right after a tag runs", "<td>@StateBadge(j.State)</td>", false},
		{"a call after text is printed", "<label>Team @teamSelect(a.Teams)</label>", true},
		{"a call after text on its own line is printed", "\tUser @userSelect(a.Users)", true},
		{"an expression as an attribute runs", `<a title={ j.Name }>`, false},
		{"an expression in quotes is printed", `<a title="{ j.Name }">`, true},
		{"an e-mail address is text", "<p>write to ops@example.org</p>", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := sourceMistakes(c.src); (len(got) > 0) != c.bad {
				t.Errorf("sourceMistakes(%q) = %q, want a mistake: %v", c.src, got, c.bad)
			}
		})
	}
}

// TestTemplatesRenderTheirSource fails when a template would show its
// own source to people, as the admin page once showed
// "Team @teamSelect(a.Teams)".
func TestTemplatesRenderTheirSource(t *testing.T) {
	files, err := filepath.Glob("*.templ")
	if err != nil || len(files) == 0 {
		t.Fatalf("no templ files: %v", err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range sourceMistakes(string(src)) {
			t.Errorf("%s: %s", f, m)
		}
	}
}
