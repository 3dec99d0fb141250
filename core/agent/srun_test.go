package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestLinkSrun(t *testing.T) {
	work := t.TempDir()
	for _, exe := range []string{"/usr/local/bin/gpuportal", "/usr/local/bin/gpuportal", "/opt/gpuportal-2/gpuportal"} {
		dir, err := linkSrun(work, exe)
		if err != nil {
			t.Fatal(err)
		}
		if target, err := os.Readlink(filepath.Join(dir, SrunCommand)); err != nil || target != exe {
			t.Errorf("srun links to %q (%v), want %q", target, err, exe)
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v %v, want a folder of mode 0755", dir, fi.Mode(), err)
		}
	}
	if entries, _ := os.ReadDir(SrunDir(work)); len(entries) != 1 {
		t.Errorf("the folder holds %d entries, want srun alone", len(entries))
	}
}

func TestPathFirst(t *testing.T) {
	for _, tc := range []struct {
		env, want []string
	}{
		{[]string{"HOME=/h", "PATH=/bin"}, []string{"HOME=/h", "PATH=/w/bin:/bin"}},
		// A job's own PATH comes after the agent's: that one is seen.
		{[]string{"PATH=/bin", "X=1", "PATH=/mine"}, []string{"PATH=/bin", "X=1", "PATH=/w/bin:/mine"}},
		{[]string{"PATH="}, []string{"PATH=/w/bin"}},
		{[]string{"HOME=/h"}, []string{"HOME=/h", "PATH=/w/bin:" + DefaultPath}},
	} {
		if got := pathFirst(append([]string(nil), tc.env...), "/w/bin"); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("pathFirst(%q) = %q, want %q", tc.env, got, tc.want)
		}
	}
	if got := pathFirst([]string{"PATH=/bin"}, ""); !reflect.DeepEqual(got, []string{"PATH=/bin"}) {
		t.Errorf("without a folder: %q", got)
	}
}
