package server

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestServeDataIsAbsolute: --data given relative (its default ./data,
// or "--data d1") is made absolute. The built-in agents hand each job's
// files helper its data path, which the helper refuses unless absolute
// ("invalid value "data=d1/userdata/bob" for flag -root: want
// NAME=/absolute/dir"): an audit saw every job's files fail to list
// under serve --dev --demo --data d1.
func TestServeDataIsAbsolute(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	abs := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, filepath.Join(wd, "data")},
		{[]string{"--data", "d1"}, filepath.Join(wd, "d1")},
		{[]string{"--data", abs}, abs},
	} {
		f, err := parseServeFlags(c.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if f.data != c.want {
			t.Errorf("%v: data %q, want %q", c.args, f.data, c.want)
		}
		if want := "sqlite:" + filepath.Join(c.want, "gpuportal.db"); f.db != want {
			t.Errorf("%v: db %q, want %q", c.args, f.db, want)
		}
		if p := devUserData(f.data); !filepath.IsAbs(p) {
			t.Errorf("%v: the data paths' folder %q is not absolute", c.args, p)
		}
	}
}
