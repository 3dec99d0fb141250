package buildinfo

import (
	"runtime/debug"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "github.com/gpuportal/gpuportal", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-20T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	installed := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.4.0"}}
	for _, tc := range []struct {
		name                   string
		bi                     *debug.BuildInfo
		ldVersion, ldRev, ldAt string
		want                   Info
		wantString             string
	}{
		{name: "a checkout's build: the toolchain's commit, dirty", bi: stamped,
			want:       Info{Version: "dev", Revision: "0123456789abcdef0123456789abcdef01234567", Modified: true, Time: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), GoVersion: "go1.26.0"},
			wantString: "dev (commit 0123456789ab-dirty, 2026-11-20T10:00:00Z, go1.26.0)"},
		{name: "the linker's stamps win", bi: stamped, ldVersion: "v1.2.0", ldRev: "fedcba9876543210", ldAt: "2026-11-21T08:30:00Z",
			want:       Info{Version: "v1.2.0", Revision: "fedcba9876543210", Time: time.Date(2026, 11, 21, 8, 30, 0, 0, time.UTC), GoVersion: "go1.26.0"},
			wantString: "v1.2.0 (commit fedcba987654, 2026-11-21T08:30:00Z, go1.26.0)"},
		{name: "go install: the module's version", bi: installed,
			want:       Info{Version: "v1.4.0", GoVersion: "go1.26.0"},
			wantString: "v1.4.0 (commit unknown, go1.26.0)"},
		{name: "a bad time is left out", bi: installed, ldAt: "yesterday",
			want: Info{Version: "v1.4.0", GoVersion: "go1.26.0"}, wantString: "v1.4.0 (commit unknown, go1.26.0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := read(tc.bi, tc.ldVersion, tc.ldRev, tc.ldAt)
			if got != tc.want {
				t.Errorf("read = %+v, want %+v", got, tc.want)
			}
			if s := got.String(); s != tc.wantString {
				t.Errorf("String = %q, want %q", s, tc.wantString)
			}
		})
	}
}
