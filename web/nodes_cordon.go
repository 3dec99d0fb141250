package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// Cordon and GPU health: admins cordon a machine (no new jobs; running
// ones keep running), uncordon it, and put back in service a GPU that
// reported an error (see core/engine/health.go).

// nodeResponse answers with the machine named by :name.
func (s *Server) nodeResponse(c echo.Context) error {
	now := time.Now()
	n, err := s.app.Node(c.Param("name"), s.heartbeatAges(now), now)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, n)
}

// clearGPU puts the GPU named by :name and :index back in service
// (app.App.ClearGPU).
func (s *Server) clearGPU(c echo.Context) error {
	index, err := strconv.Atoi(c.Param("index"))
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "index: want a GPU index (0, 1, ...)")
	}
	return s.app.ClearGPU(c.Request().Context(), appActor(c), c.Param("name"), index)
}

func (s *Server) apiClearGPU(c echo.Context) error {
	if err := noFields(c); err != nil {
		return err
	}
	if err := s.clearGPU(c); err != nil {
		return err
	}
	return s.nodeActionResponse(c, "GPU "+c.Param("index")+" cleared")
}

// nodeActionResponse answers an admin's action on the machine named by
// :name (app.App.NodeAfterAction): the machine, from the leader; from a
// follower, its hold as the store has it, with a note that the leader
// applies the action (done, such as "cordoned") on its next pass.
func (s *Server) nodeActionResponse(c echo.Context, done string) error {
	now := time.Now()
	n, err := s.app.NodeAfterAction(c.Request().Context(), appActor(c), c.Param("name"), done, s.heartbeatAges(now), now)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, n)
}

func (s *Server) clearGPUForm(c echo.Context) error {
	if err := s.clearGPU(c); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/cluster")
}
