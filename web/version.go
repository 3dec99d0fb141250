package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/buildinfo"
)

// apiVersion answers GET /api/v1/version: the server's build. It needs no
// credential, as /healthz and /metrics' build info do not: a client checks
// what it talks to before it logs in (gpuportal login, gpuportal version).
func (s *Server) apiVersion(c echo.Context) error {
	return c.JSON(http.StatusOK, api.VersionOf(buildinfo.Read()))
}
