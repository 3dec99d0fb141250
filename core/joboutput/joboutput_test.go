package joboutput

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMarkerFillsTheGapExactly(t *testing.T) {
	for _, n := range []int64{1, 2, 6, 7, 8, 30, 100, 4096} {
		m := Marker(n)
		if int64(len(m)) != n {
			t.Errorf("Marker(%d) is %d bytes: %q", n, len(m), m)
		}
		if n >= 30 && !strings.Contains(m, "lost") {
			t.Errorf("Marker(%d) = %q does not say output was lost", n, m)
		}
	}
}

// TestWriteChunk: chunks in order make the file; one beyond its end
// leaves a marker of the gap's length, and later chunks keep their
// offsets; a repeated chunk changes nothing.
func TestWriteChunk(t *testing.T) {
	path := filepath.Join(t.TempDir(), "output.log")
	steps := []struct {
		off  int64
		data string
	}{
		{0, "line 1\n"},
		{7, "line 2\n"},
		{7, "line 2\n"},   // sent again after a reconnection
		{214, "line 9\n"}, // lines 3 to 8 (200 bytes) were lost
		{221, "line 10\n"},
	}
	for _, s := range steps {
		if err := WriteChunk(path, s.off, []byte(s.data)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.HasPrefix(got, "line 1\nline 2\n\n[gpuportal: 200 bytes of output lost") || !strings.HasSuffix(got, "\nline 9\nline 10\n") || len(got) != 229 {
		t.Errorf("copy = %q (%d bytes)", got, len(got))
	}
}
