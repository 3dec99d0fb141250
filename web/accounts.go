package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

// Account control for admins: list and revoke another user's API tokens,
// disable, enable and delete accounts. The API, the admin page and
// `gpuportal admin` do the same; each change is audited, and the user's
// live connections end or lose their rights within moments
// (sockets.go). Admins cannot disable or delete their own account, so
// that the last admin cannot lock everyone out.

func userAPI(u *models.User) api.User {
	return api.User{Name: u.Name, Role: string(u.Role), Team: u.Team, Disabled: u.Disabled(),
		DisabledAt: u.DisabledAt, DisabledBy: u.DisabledBy, CreatedAt: u.CreatedAt,
		UnixName: cmp.Or(u.UnixName, u.Name), Source: cmp.Or(u.Source, models.SourceLocal)}
}

func tokenAPI(t models.APIToken) api.APIToken {
	return api.APIToken{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt}
}

// accountAction is what an admin may do to an account.
type accountAction string

// The actions on accounts, named as the audit log names them.
const (
	disableAccount accountAction = "user.disable"
	enableAccount  accountAction = "user.enable"
	deleteAccount  accountAction = "user.delete"
)

// changeAccount applies action to the account name for a, an admin,
// records it and ends or re-checks the user's live connections.
func (s *Server) changeAccount(ctx context.Context, a actor, name string, action accountAction) (api.AccountChange, error) {
	var out api.AccountChange
	if a.user.Role != models.RoleAdmin {
		return out, echo.NewHTTPError(http.StatusForbidden, "only admins may do this")
	}
	if name == a.user.Name && action != enableAccount {
		return out, echo.NewHTTPError(http.StatusConflict, "name: you cannot disable or delete your own account; ask another admin")
	}
	u, err := s.cfg.Store.UserByName(ctx, name)
	if errors.Is(err, models.ErrNotFound) {
		return out, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no user %q", name))
	}
	if err != nil {
		return out, err
	}
	now := s.cfg.Now()
	detail := ""
	switch action {
	case disableAccount:
		out.HeldJobs, err = s.cfg.Store.DisableUser(ctx, name, a.user.Name, now)
		detail = fmt.Sprintf("%d waiting jobs held", out.HeldJobs)
	case enableAccount:
		out.ReleasedJobs, err = s.cfg.Store.EnableUser(ctx, name, now)
		detail = fmt.Sprintf("%d jobs released", out.ReleasedJobs)
	case deleteAccount:
		out.HeldJobs, err = s.cfg.Store.DeleteUser(ctx, name, a.user.Name, now)
		detail = fmt.Sprintf("role %s, team %s; %d waiting jobs held", u.Role, u.Team, out.HeldJobs)
	default:
		return out, fmt.Errorf("unknown account action %q", action)
	}
	if err != nil {
		return out, err
	}
	s.hub.poke()
	s.cfg.Engine.Wake()
	s.cfg.Logger.Info("account changed", "action", string(action), "user", name, "by", a.user.Name)
	if err := s.auditBy(ctx, a, string(action), name, detail); err != nil {
		return out, err
	}
	if action == deleteAccount {
		out.User = userAPI(u)
		return out, nil
	}
	if u, err = s.cfg.Store.UserByName(ctx, name); err != nil {
		return out, err
	}
	out.User = userAPI(u)
	return out, nil
}

// userTokens lists the API tokens of the user name, for an admin.
func (s *Server) userTokens(ctx context.Context, name string) ([]api.APIToken, error) {
	ts, err := s.cfg.Store.UserTokens(ctx, name, s.cfg.Now())
	if errors.Is(err, models.ErrNotFound) {
		return nil, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no user %q", name))
	}
	if err != nil {
		return nil, err
	}
	out := make([]api.APIToken, 0, len(ts))
	for _, t := range ts {
		out = append(out, tokenAPI(t))
	}
	return out, nil
}

// revokeUserToken revokes API token id of the user name for a, an admin
// (or the token's owner), records it and ends the connections opened
// with it.
func (s *Server) revokeUserToken(ctx context.Context, a actor, name string, id int64) error {
	if a.user.Role != models.RoleAdmin && a.user.Name != name {
		return echo.NewHTTPError(http.StatusForbidden, "only admins may revoke another user's tokens")
	}
	err := s.cfg.Store.RevokeUserToken(ctx, name, id)
	if errors.Is(err, models.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("user %q has no token %d", name, id))
	}
	if err != nil {
		return err
	}
	s.hub.poke()
	return s.auditBy(ctx, a, "token.revoke", name, strconv.FormatInt(id, 10))
}

func (s *Server) apiUsers(c echo.Context) error {
	us, err := s.cfg.Store.Users(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]api.User, 0, len(us))
	for i := range us {
		out = append(out, userAPI(&us[i]))
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) apiUserTokens(c echo.Context) error {
	ts, err := s.userTokens(c.Request().Context(), c.Param("name"))
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
	if err := s.revokeUserToken(c.Request().Context(), actorOf(c), c.Param("name"), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// apiAccountAction answers an admin's action on the account :name.
func (s *Server) apiAccountAction(action accountAction) echo.HandlerFunc {
	return func(c echo.Context) error {
		out, err := s.changeAccount(c.Request().Context(), actorOf(c), c.Param("name"), action)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, out)
	}
}

// accountsView is the admin page's account control for users us.
func (s *Server) accountsView(c echo.Context, us []models.User) (templates.Accounts, error) {
	var v templates.Accounts
	tokens, err := s.cfg.Store.AllAPITokens(c.Request().Context(), s.cfg.Now())
	if err != nil {
		return v, err
	}
	me := currentUser(c)
	for _, u := range us {
		row := templates.AccountRow{Name: u.Name, Role: string(u.Role), Team: u.Team, Disabled: u.Disabled(), Self: u.ID == me.ID}
		if u.Disabled() {
			row.DisabledNote = fmt.Sprintf("by %s at %s", u.DisabledBy, u.DisabledAt.Local().Format(timeLayout))
		}
		for _, t := range tokens[u.ID] {
			row.Tokens = append(row.Tokens, templates.TokenRow{ID: t.ID, Name: t.Name,
				Created: t.CreatedAt.Local().Format(timeLayout), Expires: t.ExpiresAt.Local().Format(timeLayout)})
		}
		v.Users = append(v.Users, row)
	}
	return v, nil
}
