package web

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/templates"
)

// Account control for admins: list and revoke another user's API tokens,
// disable, enable and delete accounts (app.App.ChangeAccount and its
// siblings). The API, the admin page and `gpuportal admin` do the same;
// each change is audited, and the user's live connections end or lose
// their rights within moments (sockets.go).

func (s *Server) apiUsers(c echo.Context) error {
	out, err := s.app.Users(c.Request().Context(), appActor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) apiUserTokens(c echo.Context) error {
	ts, err := s.app.UserTokens(c.Request().Context(), appActor(c), c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ts)
}

func (s *Server) apiRevokeUserToken(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return echo.NewHTTPError(http.StatusBadRequest, "id: must be a token's number")
	}
	if err := s.app.RevokeUserToken(c.Request().Context(), appActor(c), c.Param("name"), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// apiAccountAction answers an admin's action on the account :name.
func (s *Server) apiAccountAction(action app.AccountAction) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := noFields(c); err != nil {
			return err
		}
		out, err := s.app.ChangeAccount(c.Request().Context(), appActor(c), c.Param("name"), action)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
}

// accountsView is the admin page's account control: every account of o
// with its API tokens.
func accountsView(c echo.Context, o app.AdminOverview) templates.Accounts {
	var v templates.Accounts
	me := currentUser(c)
	for _, u := range o.Users {
		row := templates.AccountRow{Name: u.Name, Role: u.Role, Team: u.Team, Disabled: u.Disabled, Self: u.Name == me.Name,
			UnixName: u.UnixName, Source: u.Source}
		if u.Disabled && u.DisabledAt != nil {
			row.DisabledNote = fmt.Sprintf("by %s at %s", u.DisabledBy, u.DisabledAt.Local().Format(timeLayout))
		}
		for _, t := range o.Tokens[u.Name] {
			row.Tokens = append(row.Tokens, tokenRow(t))
		}
		v.Users = append(v.Users, row)
	}
	return v
}

// tokenRow is an API token as the pages show it (the user's own tokens
// page and the admin's users table), from the API's form of it: named,
// created, last used and expiring.
func tokenRow(t api.APIToken) templates.TokenRow {
	row := templates.TokenRow{ID: t.ID, Name: t.Name, Created: t.CreatedAt.Local().Format(timeLayout),
		Expires: t.ExpiresAt.Local().Format(timeLayout), LastUsed: "never"}
	if t.LastUsedAt != nil {
		row.LastUsed = t.LastUsedAt.Local().Format(timeLayout)
	}
	return row
}
