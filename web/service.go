package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/models"
)

// What a request does lives in package app, once for the form and the
// API: handlers parse their input, call one of its actions with the
// actor who asks, and render the result. An action's refusal is an
// *app.Error; appStatus is the one place its kind becomes an HTTP status.

// actor is who asks for a change, and from where (the audit log).
type actor struct {
	user *models.User
	from string // the client's address
}

// actorOf is the current user of c.
func actorOf(c echo.Context) actor {
	return actor{user: currentUser(c), from: c.RealIP()}
}

// appActor is the current user of c, as the actions take it.
func appActor(c echo.Context) app.Actor {
	return app.Actor{User: currentUser(c), From: c.RealIP()}
}

// auditBy records an action of a in the audit log.
func (s *Server) auditBy(ctx context.Context, a actor, action, target, detail string) error {
	return s.cfg.Store.Audit(ctx, models.AuditEntry{
		At: s.cfg.Now(), Actor: a.user.Name, Action: action, Target: target, Detail: detail, From: a.from,
	})
}

// jobFor returns job id if u may see it (app.App.Job).
func (s *Server) jobFor(ctx context.Context, u *models.User, id int64) (*models.Job, error) {
	return s.app.Job(ctx, app.Actor{User: u}, id)
}

// appStatus is the HTTP status of an action's refusal of kind k.
func appStatus(k app.Kind) int {
	switch k {
	case app.NotFound:
		return http.StatusNotFound
	case app.Forbidden:
		return http.StatusForbidden
	case app.Invalid:
		return http.StatusBadRequest
	case app.Conflict:
		return http.StatusConflict
	case app.Unavailable:
		return http.StatusServiceUnavailable
	case app.Unprocessable:
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// fieldErrorsOf returns the fields at fault of a submission refused as
// invalid, and nil for any other error.
func fieldErrorsOf(err error) app.FieldErrors {
	var ae *app.Error
	if errors.As(err, &ae) && ae.Kind == app.Invalid {
		return ae.Fields
	}
	return nil
}

// fieldErrors maps a field of a form or request to what is wrong with it.
type fieldErrors = app.FieldErrors
