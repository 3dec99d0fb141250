package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
)

// Join tokens and machines, for admins (docs/agents.md, "Joining
// machines"); the same actions as `gpuportal admin create-join-token` and
// its siblings, audited.

func (s *Server) apiJoinTokens(c echo.Context) error {
	out, err := s.app.JoinTokens(c.Request().Context(), appActor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) apiCreateJoinToken(c echo.Context) error {
	var req api.JoinTokenRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	out, err := s.app.CreateJoinToken(c.Request().Context(), appActor(c), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, out)
}

func (s *Server) apiRevokeJoinToken(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return echo.NewHTTPError(http.StatusBadRequest, "id: want a join token's number")
	}
	if err := s.app.RevokeJoinToken(c.Request().Context(), appActor(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiMachines(c echo.Context) error {
	out, err := s.app.Machines(c.Request().Context(), appActor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) apiRemoveMachine(c echo.Context) error {
	if err := s.app.RemoveMachine(c.Request().Context(), appActor(c), c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
