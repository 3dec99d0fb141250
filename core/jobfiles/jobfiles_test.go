package jobfiles

import (
	"errors"
	"testing"
)

func kind(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

func TestCleanPath(t *testing.T) {
	for in, want := range map[string]string{"": ".", "/": ".", "a//b/./c": "a/b/c", "/checkpoint/": "checkpoint"} {
		if got, err := CleanPath(in); err != nil || got != want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"..", "a/../b", "a\x00b"} {
		if _, err := CleanPath(in); kind(err) != Invalid {
			t.Errorf("CleanPath(%q): %v, want refused", in, err)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 1 << 30: "1 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1048576": 1 << 20, "512MiB": 512 << 20, "1.5GiB": 3 << 29, "2 KiB": 2048} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "1GB", "lots"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}
