package web

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/models"
)

// apiRevokeCurrentToken answers DELETE /api/v1/tokens/current: the API
// token of the request revokes itself (gpuportal logout). Live
// connections opened with it end within seconds.
func (s *Server) apiRevokeCurrentToken(c echo.Context) error {
	cred := currentCredential(c)
	if cred.kind != credToken {
		return echo.NewHTTPError(http.StatusBadRequest, "Authorization: only an API token from POST /api/v1/tokens or the API tokens page can revoke itself")
	}
	u := currentUser(c)
	err := s.cfg.Store.RevokeAPITokenByHash(c.Request().Context(), u.ID, cred.hash)
	if errors.Is(err, models.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, "this token is already revoked")
	}
	if err != nil {
		return err
	}
	s.hub.poke()
	if err := s.audit(c, "token.revoke", u.Name, "itself (logout)"); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
