// Package buildinfo says which build of gpuportal is running: its
// version, the commit it was built from and when, for --version, the
// version command and GET /api/v1/version.
//
// The Go toolchain stamps the commit (vcs.revision, vcs.time,
// vcs.modified) into binaries built inside a Git checkout. A release
// build names its version at link time:
//
//	go build -ldflags "-X github.com/gpuportal/gpuportal/core/buildinfo.version=v1.2.0" ./cmd/gpuportal
//
// and may name its commit and time the same way (revision, commitTime) where
// the build has no .git folder, as in a container build from a source
// tarball.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Set at link time with -ldflags "-X"; empty: read from the build info.
var (
	version    string
	revision   string
	commitTime string
)

// Info describes one build.
type Info struct {
	// Version is the release (-X ...buildinfo.version=v1.2.0), else the
	// main module's version when built with go install, else "dev".
	Version string
	// Revision is the commit the binary was built from; empty when
	// unknown. Modified: the working tree had uncommitted changes.
	Revision string
	Modified bool
	// Time is the commit's time; zero when unknown.
	Time time.Time
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// Read returns the running binary's build.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return read(bi, version, revision, commitTime)
}

// read merges the linker's stamps (which win) with the toolchain's.
func read(bi *debug.BuildInfo, ldVersion, ldRevision, ldTime string) Info {
	in := Info{Version: ldVersion, Revision: ldRevision, GoVersion: runtime.Version()}
	var vcsTime string
	if bi != nil {
		in.GoVersion = bi.GoVersion
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if in.Revision == "" {
					in.Revision = s.Value
				}
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true" && ldRevision == ""
			}
		}
	}
	if ldTime != "" {
		vcsTime = ldTime
	}
	if t, err := time.Parse(time.RFC3339, vcsTime); err == nil {
		in.Time = t.UTC()
	}
	if in.Version == "" {
		in.Version = "dev"
	}
	return in
}

// ShortRevision is the first 12 characters of the commit, with
// "-dirty" when the tree was modified; "unknown" when there is none.
func (in Info) ShortRevision() string {
	if in.Revision == "" {
		return "unknown"
	}
	r := in.Revision
	if len(r) > 12 {
		r = r[:12]
	}
	if in.Modified {
		r += "-dirty"
	}
	return r
}

// String is the one line that --version prints after the program's name:
// "v1.2.0 (commit 0123456789ab, 2026-11-24T13:00:00Z, go1.26.0)".
func (in Info) String() string {
	parts := []string{"commit " + in.ShortRevision()}
	if !in.Time.IsZero() {
		parts = append(parts, in.Time.Format(time.RFC3339))
	}
	parts = append(parts, in.GoVersion)
	return fmt.Sprintf("%s (%s)", in.Version, strings.Join(parts, ", "))
}
