package server

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestMetricsFlags: the token of /metrics comes from its file, the first
// line, long enough; a file that is missing or holds a short token is
// refused naming the flag.
func TestMetricsFlags(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good", "  0123456789abcdef0123 \r\nsecond line\n")
	checkServeFlags(t, []flagCase{
		{"none", nil, ""},
		{"a token file", []string{"--metrics-token-file", good}, ""},
		{"user labels without a token", []string{"--metrics-user-labels"}, ""},
		{"a missing file", []string{"--metrics-token-file", filepath.Join(dir, "missing")}, "--metrics-token-file"},
		{"a short token", []string{"--metrics-token-file", file("short", "abc\n")}, "--metrics-token-file"},
		{"an empty file", []string{"--metrics-token-file", file("empty", "")}, "--metrics-token-file"},
	})
	f, err := parseServeFlags([]string{"--metrics-token-file", good}, io.Discard)
	if err != nil || f.metrics.token != "0123456789abcdef0123" {
		t.Errorf("token %q (%v); want the first line, trimmed", f.metrics.token, err)
	}
}
