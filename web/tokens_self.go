package web

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// apiRevokeCurrentToken answers DELETE /api/v1/tokens/current: the API
// token of the request revokes itself (gpuportal logout). Live
// connections opened with it end within seconds.
func (s *Server) apiRevokeCurrentToken(c echo.Context) error {
	cred := currentCredential(c)
	if cred.kind != credToken {
		return echo.NewHTTPError(http.StatusBadRequest, "Authorization: only an API token from POST /api/v1/tokens or the API tokens page can revoke itself")
	}
	if err := s.app.RevokeTokenItself(c.Request().Context(), appActor(c), cred.hash); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
