package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// setUnixName records, for an admin, the Unix account that the jobs of
// the user called name run as. A bad name is a 400 naming unix_name; an
// unknown user a 404.
func (s *Server) setUnixName(ctx context.Context, by actor, name, unix string) (api.User, error) {
	err := s.cfg.Store.SetUnixName(ctx, name, unix)
	switch {
	case errors.Is(err, models.ErrInvalid):
		msg := strings.TrimSuffix(err.Error(), ": "+models.ErrInvalid.Error())
		_, msg, _ = strings.Cut(msg, ": unix name ")
		return api.User{}, badRequest("unix_name: %s", msg)
	case errors.Is(err, models.ErrNotFound):
		return api.User{}, echo.NewHTTPError(http.StatusNotFound, "no user "+name)
	case err != nil:
		return api.User{}, err
	}
	u, err := s.cfg.Store.UserByName(ctx, name)
	if err != nil {
		return api.User{}, err
	}
	if err := s.auditBy(ctx, by, "user.unix_name", name, "unix name "+unix); err != nil {
		return api.User{}, err
	}
	return userAPI(u), nil
}

// apiSetUnixName is PUT /api/v1/users/:name/unix-name.
func (s *Server) apiSetUnixName(c echo.Context) error {
	var req api.SetUnixName
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	u, err := s.setUnixName(c.Request().Context(), actorOf(c), c.Param("name"), req.UnixName)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, u)
}

// unixNameForm is the admin page's form.
func (s *Server) unixNameForm(c echo.Context, name string) (string, error) {
	u, err := s.setUnixName(c.Request().Context(), actorOf(c), name, c.FormValue("unix_name"))
	if err != nil {
		return "", asFormError(err)
	}
	return fmt.Sprintf("Jobs of %s run as the Unix account %s.", u.Name, u.UnixName), nil
}
