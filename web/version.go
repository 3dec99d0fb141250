package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/buildinfo"
)

// VersionOf converts a build to its API type.
func VersionOf(in buildinfo.Info) api.Version {
	v := api.Version{Version: in.Version, Revision: in.Revision, Modified: in.Modified, GoVersion: in.GoVersion}
	if !in.Time.IsZero() {
		t := in.Time
		v.CommitTime = &t
	}
	return v
}

// apiVersion answers GET /api/v1/version: the server's build. It needs no
// credential, as /healthz and /metrics' build info do not: a client checks
// what it talks to before it logs in (gpuportal login, gpuportal version).
func (s *Server) apiVersion(c echo.Context) error {
	return c.JSON(http.StatusOK, VersionOf(buildinfo.Read()))
}
