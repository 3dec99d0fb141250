package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// Join tokens and machines, for admins (docs/agents.md, "Joining
// machines"); the same actions as `gpuportal admin create-join-token` and
// its siblings, audited.

func joinTokenAPI(t models.JoinToken, now time.Time) api.JoinToken {
	return api.JoinToken{ID: t.ID, Name: t.Name, Active: t.Active(now), Machines: t.Uses, CreatedBy: t.CreatedBy,
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt}
}

func (s *Server) apiJoinTokens(c echo.Context) error {
	ts, err := s.cfg.Store.JoinTokens(c.Request().Context())
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	out := make([]api.JoinToken, 0, len(ts))
	for _, t := range ts {
		out = append(out, joinTokenAPI(t, now))
	}
	return c.JSON(http.StatusOK, out)
}

// maxJoinTokenTTL bounds a join token's life.
const maxJoinTokenTTL = 365 * 24 * time.Hour

func (s *Server) apiCreateJoinToken(c echo.Context) error {
	var req struct {
		Name string `json:"name"`
		TTLS *int64 `json:"ttl_s"` // absent: 24 h; 0: until revoked
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Name == "" || len(req.Name) > 128 {
		return echo.NewHTTPError(http.StatusBadRequest, "name: want 1 to 128 characters")
	}
	ttl := 24 * time.Hour
	if req.TTLS != nil {
		if *req.TTLS < 0 || time.Duration(*req.TTLS)*time.Second > maxJoinTokenTTL {
			return echo.NewHTTPError(http.StatusBadRequest, "ttl_s: want 0 (until revoked) to 31536000 seconds")
		}
		ttl = time.Duration(*req.TTLS) * time.Second
	}
	a := actorOf(c)
	token, t, err := s.cfg.Store.CreateJoinToken(c.Request().Context(), req.Name, a.user.Name, s.cfg.Now(), ttl)
	if err != nil {
		return err
	}
	if err := s.audit(c, "join-token.create", strconv.FormatInt(t.ID, 10), fmt.Sprintf("%s, ttl %s", t.Name, ttl)); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, api.NewJoinToken{Token: token, JoinToken: joinTokenAPI(*t, s.cfg.Now())})
}

func (s *Server) apiRevokeJoinToken(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return echo.NewHTTPError(http.StatusBadRequest, "id: want a join token's number")
	}
	err = s.cfg.Store.RevokeJoinToken(c.Request().Context(), id, s.cfg.Now())
	if errors.Is(err, models.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no active join token %d", id))
	}
	if err != nil {
		return err
	}
	if err := s.audit(c, "join-token.revoke", strconv.FormatInt(id, 10), ""); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiMachines(c echo.Context) error {
	ms, err := s.cfg.Store.Machines(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]api.Machine, 0, len(ms))
	for _, m := range ms {
		out = append(out, api.Machine{Name: m.Name, JoinedWith: m.JoinedWith, CreatedAt: m.CreatedAt, LastSeenAt: m.LastSeenAt})
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) apiRemoveMachine(c echo.Context) error {
	name := c.Param("name")
	err := s.cfg.Store.RemoveMachine(c.Request().Context(), name)
	if errors.Is(err, models.ErrNotFound) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no machine %q registered", name))
	}
	if err != nil {
		return err
	}
	if err := s.audit(c, "machine.remove", name, ""); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
