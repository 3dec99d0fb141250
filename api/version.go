package api

import (
	"time"

	"github.com/gpuportal/gpuportal/core/buildinfo"
)

// Version is the build of a gpuportal binary: GET /api/v1/version says
// the server's, "gpuportal version -o json" the client's beside it.
type Version struct {
	// Version is the release, such as v1.2.0, or "dev".
	Version string `json:"version"`
	// Revision is the commit it was built from; empty when unknown.
	Revision string `json:"revision"`
	// Modified: built from a tree with uncommitted changes.
	Modified bool `json:"modified"`
	// CommitTime is the commit's time; null when unknown.
	CommitTime *time.Time `json:"commit_time"`
	GoVersion  string     `json:"go_version"`
}

// VersionOf converts a build to its API type.
func VersionOf(in buildinfo.Info) Version {
	v := Version{Version: in.Version, Revision: in.Revision, Modified: in.Modified, GoVersion: in.GoVersion}
	if !in.Time.IsZero() {
		t := in.Time
		v.CommitTime = &t
	}
	return v
}
