package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
)

// apiSetUnixName is PUT /api/v1/users/:name/unix-name.
func (s *Server) apiSetUnixName(c echo.Context) error {
	var req api.SetUnixName
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	u, err := s.app.SetUnixName(c.Request().Context(), appActor(c), c.Param("name"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, u)
}
