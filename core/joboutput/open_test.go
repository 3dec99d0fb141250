package joboutput

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOpenReadsOnlyTheJobsOwnFile: what a job may put where its output
// is expected, and whether the reader takes it.
func TestOpenReadsOnlyTheJobsOwnFile(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		make    func(path string) error
		wantErr string
	}{
		{"its output", func(p string) error { return os.WriteFile(p, []byte("epoch 1\n"), 0o600) }, ""},
		{"a link to another file", func(p string) error { return os.Symlink(secret, p) }, "is a link"},
		{"a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "not a regular file"},
		{"a hard link to another file", func(p string) error { return os.Link(secret, p) }, "names"},
		{"a folder", func(p string) error { return os.Mkdir(p, 0o700) }, "not a regular file"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "output.log"+strings.Repeat("x", i))
			if err := tc.make(p); err != nil {
				t.Fatal(err)
			}
			f, err := Open(p)
			if err == nil {
				f.Close()
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("err %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("err %v, want one with %q", err, tc.wantErr)
			}
		})
	}
}
