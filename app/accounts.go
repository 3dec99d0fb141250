package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// The actions on accounts, for admins: make one, change its role and
// team, its password, its Unix account; disable, enable, delete it;
// list and revoke its API tokens. Each is audited; a change that ends or
// narrows someone's access tells Config.AccessChanged. Admins cannot
// disable or delete their own account, nor change their own role, so
// that the last admin cannot lock everyone out.

// Bounds of a password.
const (
	MinPassword = 8
	MaxPassword = 72 // bcrypt reads no further: a longer one would be cut
)

// userAPI is u as the API shows an account.
func userAPI(u *models.User) api.User {
	return api.User{Name: u.Name, Role: string(u.Role), Team: u.Team, Disabled: u.Disabled(),
		DisabledAt: u.DisabledAt, DisabledBy: u.DisabledBy, CreatedAt: u.CreatedAt,
		UnixName: cmp.Or(u.UnixName, u.Name), Source: cmp.Or(u.Source, models.SourceLocal)}
}

// tokenAPI is t as the API shows an API token.
func tokenAPI(t models.APIToken) api.APIToken {
	return api.APIToken{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt}
}

// checkPassword says what is wrong with a new password, naming the field.
func checkPassword(pw string) error {
	switch {
	case len(pw) < MinPassword:
		return invalid("password", "password: must be at least %d characters", MinPassword)
	case len(pw) > MaxPassword:
		return invalid("password", "password: must be at most %d bytes (bcrypt reads no further)", MaxPassword)
	}
	return nil
}

// checkRoleTeam says what is wrong with a role and team for a user,
// naming the field: the team must exist, and only admins may have none.
func (s *App) checkRoleTeam(ctx context.Context, role models.Role, team string) error {
	if !role.Valid() {
		return invalid("role", "role: must be researcher, lead or admin, not %q", role)
	}
	if team == "" {
		if role != models.RoleAdmin {
			return invalid("team", "team: a %s needs a team", role)
		}
		return nil
	}
	teams, err := s.teamNames(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(teams, team) {
		return invalid("team", "team: no team %q", team)
	}
	return nil
}

// noUser is the answer for an account the store does not have.
func noUser(err error, name string) error {
	if errors.Is(err, models.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("no user %q", name), Err: err}
	}
	return stored(err)
}

// Users lists every account, for an admin.
func (s *App) Users(ctx context.Context, a Actor) ([]api.User, error) {
	if err := onlyAdmins(a); err != nil {
		return nil, err
	}
	us, err := s.cfg.Store.Users(ctx)
	if err != nil {
		return nil, stored(err)
	}
	out := make([]api.User, 0, len(us))
	for i := range us {
		out = append(out, userAPI(&us[i]))
	}
	return out, nil
}

// CreateUser makes an account with a password, for an admin.
func (s *App) CreateUser(ctx context.Context, a Actor, req api.CreateUser) error {
	if err := onlyAdmins(a); err != nil {
		return err
	}
	if err := models.CheckName(req.Name); err != nil {
		return invalid("name", "name: %s", err)
	}
	role := models.Role(req.Role)
	if err := s.checkRoleTeam(ctx, role, req.Team); err != nil {
		return err
	}
	if err := checkPassword(req.Password); err != nil {
		return err
	}
	if _, err := s.cfg.Store.CreateUser(ctx, req.Name, req.Password, role, req.Team); errors.Is(err, models.ErrExists) {
		return invalid("name", "name: user %s already exists", req.Name)
	} else if err != nil {
		return stored(err)
	}
	return s.audit(ctx, a, "user.create", req.Name, fmt.Sprintf("role %s team %s", role, req.Team))
}

// SetRole changes the role and team of the account name, for an admin
// other than its owner. Its live connections lose the old team's topics
// at once.
func (s *App) SetRole(ctx context.Context, a Actor, name string, req api.SetRole) error {
	if err := onlyAdmins(a); err != nil {
		return err
	}
	if name == a.User.Name {
		return invalid("name", "name: you may not change your own role; ask another admin")
	}
	role := models.Role(req.Role)
	if err := s.checkRoleTeam(ctx, role, req.Team); err != nil {
		return err
	}
	if err := s.cfg.Store.SetRole(ctx, name, role, req.Team); errors.Is(err, models.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: "no user " + name, Err: err}
	} else if err != nil {
		return stored(err)
	}
	s.cfg.AccessChanged()
	return s.audit(ctx, a, "user.role", name, fmt.Sprintf("role %s team %s", role, req.Team))
}

// ResetPassword sets the password of the local account name, for an
// admin: its sessions, API tokens and live connections end.
func (s *App) ResetPassword(ctx context.Context, a Actor, name string, req api.SetPassword) error {
	if err := onlyAdmins(a); err != nil {
		return err
	}
	if err := checkPassword(req.Password); err != nil {
		return err
	}
	err := s.cfg.Store.SetPassword(ctx, name, req.Password)
	switch {
	case errors.Is(err, models.ErrNotFound):
		return &Error{Kind: NotFound, Msg: "no user " + name, Err: err}
	case errors.Is(err, models.ErrInvalid):
		return invalid("name", "name: %s signs in through the lab's directory or identity provider, which keeps the password", name)
	case err != nil:
		return stored(err)
	}
	s.cfg.AccessChanged()
	return s.audit(ctx, a, "user.password", name, "sessions and tokens ended")
}

// SetUnixName records, for an admin, the Unix account that the jobs of
// the user name run as.
func (s *App) SetUnixName(ctx context.Context, a Actor, name string, req api.SetUnixName) (api.User, error) {
	if err := onlyAdmins(a); err != nil {
		return api.User{}, err
	}
	err := s.cfg.Store.SetUnixName(ctx, name, req.UnixName)
	switch {
	case errors.Is(err, models.ErrInvalid):
		msg := strings.TrimSuffix(err.Error(), ": "+models.ErrInvalid.Error())
		_, msg, _ = strings.Cut(msg, ": unix name ")
		return api.User{}, invalid("unix_name", "unix_name: %s", msg)
	case errors.Is(err, models.ErrNotFound):
		return api.User{}, &Error{Kind: NotFound, Msg: "no user " + name, Err: err}
	case err != nil:
		return api.User{}, stored(err)
	}
	u, err := s.cfg.Store.UserByName(ctx, name)
	if err != nil {
		return api.User{}, stored(err)
	}
	if err := s.audit(ctx, a, "user.unix_name", name, "unix name "+req.UnixName); err != nil {
		return api.User{}, err
	}
	return userAPI(u), nil
}

// AccountAction is what an admin may do to an account.
type AccountAction string

// The actions on accounts, named as the audit log names them.
const (
	DisableAccount AccountAction = "user.disable"
	EnableAccount  AccountAction = "user.enable"
	DeleteAccount  AccountAction = "user.delete"
)

// ChangeAccount applies action to the account name, for an admin other
// than its owner (who may only enable it): disabling or deleting it holds
// its waiting jobs and ends its sessions, tokens and live connections;
// enabling it releases its held jobs.
func (s *App) ChangeAccount(ctx context.Context, a Actor, name string, action AccountAction) (api.AccountChange, error) {
	var out api.AccountChange
	if err := onlyAdmins(a); err != nil {
		return out, err
	}
	if name == a.User.Name && action != EnableAccount {
		return out, conflict("name: you cannot disable or delete your own account; ask another admin")
	}
	u, err := s.cfg.Store.UserByName(ctx, name)
	if err != nil {
		return out, noUser(err, name)
	}
	now := s.cfg.Now()
	detail := ""
	switch action {
	case DisableAccount:
		out.HeldJobs, err = s.cfg.Store.DisableUser(ctx, name, a.User.Name, now)
		detail = fmt.Sprintf("%d waiting jobs held", out.HeldJobs)
	case EnableAccount:
		out.ReleasedJobs, err = s.cfg.Store.EnableUser(ctx, name, now)
		detail = fmt.Sprintf("%d jobs released", out.ReleasedJobs)
	case DeleteAccount:
		out.HeldJobs, err = s.cfg.Store.DeleteUser(ctx, name, a.User.Name, now)
		detail = fmt.Sprintf("role %s, team %s; %d waiting jobs held", u.Role, u.Team, out.HeldJobs)
	default:
		return out, fmt.Errorf("unknown account action %q", action)
	}
	if err != nil {
		return out, stored(err)
	}
	s.cfg.AccessChanged()
	s.cfg.Engine.Wake()
	s.cfg.Logger.Info("account changed", "action", string(action), "user", name, "by", a.User.Name)
	if err := s.audit(ctx, a, string(action), name, detail); err != nil {
		return out, err
	}
	if action != DeleteAccount {
		if u, err = s.cfg.Store.UserByName(ctx, name); err != nil {
			return out, stored(err)
		}
	}
	out.User = userAPI(u)
	return out, nil
}

// UserTokens lists the API tokens of the user name, for an admin.
func (s *App) UserTokens(ctx context.Context, a Actor, name string) ([]api.APIToken, error) {
	if err := onlyAdmins(a); err != nil {
		return nil, err
	}
	ts, err := s.cfg.Store.UserTokens(ctx, name, s.cfg.Now())
	if err != nil {
		return nil, noUser(err, name)
	}
	out := make([]api.APIToken, 0, len(ts))
	for _, t := range ts {
		out = append(out, tokenAPI(t))
	}
	return out, nil
}

// RevokeUserToken revokes API token id of the user name, for an admin or
// the token's owner; the connections opened with it end.
func (s *App) RevokeUserToken(ctx context.Context, a Actor, name string, id int64) error {
	if a.User.Role != RoleAdmin && a.User.Name != name {
		return forbidden("only admins may revoke another user's tokens")
	}
	if id < 1 {
		return invalid("id", "id: must be a token's number")
	}
	err := s.cfg.Store.RevokeUserToken(ctx, name, id)
	if errors.Is(err, models.ErrNotFound) {
		return &Error{Kind: NotFound, Msg: fmt.Sprintf("user %q has no token %d", name, id), Err: err}
	}
	if err != nil {
		return stored(err)
	}
	s.cfg.AccessChanged()
	return s.audit(ctx, a, "token.revoke", name, strconv.FormatInt(id, 10))
}
