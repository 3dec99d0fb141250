package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/models"
)

// What a request does, once for the form and the API: each takes typed
// input and the actor who asks, checks that the actor may, makes the
// change and records it. Handlers parse their input, call one of these
// and render the result. Errors that the user can fix are
// *echo.HTTPError (4xx) that name the field or the object at fault.

// actor is who asks for a change, and from where (the audit log).
type actor struct {
	user *models.User
	from string // the client's address
}

// actorOf is the current user of c.
func actorOf(c echo.Context) actor {
	return actor{user: currentUser(c), from: c.RealIP()}
}

// auditBy records an action of a in the audit log.
func (s *Server) auditBy(ctx context.Context, a actor, action, target, detail string) error {
	return s.cfg.Store.Audit(ctx, models.AuditEntry{
		At: s.cfg.Now(), Actor: a.user.Name, Action: action, Target: target, Detail: detail, From: a.from,
	})
}

// jobFor returns job id if u may see it. A job of a team u may not see
// gets the answer of one that does not exist (noSuch).
func (s *Server) jobFor(ctx context.Context, u *models.User, id int64) (*models.Job, error) {
	j, err := s.cfg.Store.Job(ctx, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, noSuch("job", id)
	}
	if err != nil {
		return nil, err
	}
	if !canSee(u, j.Team) {
		return nil, noSuch("job", id)
	}
	return j, nil
}

// noSuch is the one answer, 404, for a job (or array) that does not
// exist and for one of a team the user may not see: otherwise the
// difference would let anyone probe which IDs other teams hold, and
// when they submit.
func noSuch(what string, id int64) error {
	return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no such %s: %d", what, id))
}

// checkSubmit validates req for a and returns the job it would store,
// or what is wrong with req field by field.
func (s *Server) checkSubmit(ctx context.Context, a actor, req SubmitRequest) (*models.Job, fieldErrors, error) {
	teams, err := s.teamNames(ctx)
	if err != nil {
		return nil, nil, err
	}
	j, fe := req.validate(a.user, teams, s.clusterGPUs())
	if fe == nil {
		fe = fieldErrors{}
	}
	if j != nil {
		if err := s.checkJobLimits(ctx, a.user, j, fe); err != nil {
			return nil, nil, err
		}
	}
	if _, bad := fe["image"]; !bad && req.Image != "" && !s.cfg.AllowedImages.Allows(req.Image) {
		fe["image"] = s.cfg.AllowedImages.Refusal(req.Image)
	}
	if len(fe) == 0 {
		fe = nil
	}
	return j, fe, nil
}

// submitJob validates req for a and stores the job, or an array's tasks
// (returning the first); when req is not valid it stores nothing and
// returns what is wrong, field by field.
func (s *Server) submitJob(ctx context.Context, a actor, req SubmitRequest) (*models.Job, fieldErrors, error) {
	j, fe, err := s.checkSubmit(ctx, a, req)
	if err != nil || fe != nil {
		return nil, fe, err
	}
	j.SubmittedAt = s.cfg.Now()
	if j.IsSession() {
		if j.SessionSecret, err = models.NewSessionSalt(); err != nil {
			return nil, nil, err
		}
	}
	if tasks := req.spec(fieldErrors{}).tasks(j); tasks != nil {
		if err := s.cfg.Store.CreateArray(ctx, tasks); err != nil {
			return nil, nil, err
		}
		j = tasks[0]
		s.cfg.Logger.Info("array submitted", "array", j.ArrayID, "tasks", len(tasks), "limit", j.ArrayLimit, "user", j.User, "team", j.Team)
	} else if err := s.cfg.Store.CreateJob(ctx, j); err != nil {
		return nil, nil, err
	}
	s.cfg.Engine.Wake()
	s.cfg.Logger.Info("job submitted", "job", j.ID, "user", j.User, "team", j.Team, "gpus", j.GPUs)
	return j, nil, nil
}

// cancelJob cancels job id for a and returns it as it is afterwards (a
// running job may still be stopping): for its owner, its team's lead or
// an admin.
func (s *Server) cancelJob(ctx context.Context, a actor, id int64) (*models.Job, error) {
	j, err := s.jobFor(ctx, a.user, id)
	if err != nil {
		return nil, err
	}
	if !canCancel(a.user, j) {
		return nil, echo.NewHTTPError(http.StatusForbidden, fmt.Sprintf("job %d belongs to %s: only its owner, the lead of %s or an admin may cancel it", j.ID, j.User, j.Team))
	}
	if j.State.Final() {
		return nil, echo.NewHTTPError(http.StatusConflict, fmt.Sprintf("job %d has already ended (%s)", j.ID, j.State))
	}
	err = s.cfg.Engine.Cancel(ctx, j.ID, "cancelled by "+a.user.Name)
	if errors.Is(err, models.ErrConflict) {
		return nil, echo.NewHTTPError(http.StatusConflict, fmt.Sprintf("job %d has already ended", j.ID))
	}
	if err != nil {
		return nil, err
	}
	s.cfg.Logger.Info("job cancel requested", "job", j.ID, "by", a.user.Name)
	if a.user.Name != j.User {
		if err := s.auditBy(ctx, a, "job.cancel", fmt.Sprintf("job %d of %s", j.ID, j.User), ""); err != nil {
			return nil, err
		}
	}
	return s.cfg.Store.Job(ctx, j.ID)
}

// nodeAction is what an admin may do to a machine.
type nodeAction string

// The actions on machines, named as the audit log names them.
const (
	drainNode    nodeAction = "node.drain"    // no new jobs; it empties as its jobs end
	resumeNode   nodeAction = "node.resume"   // ready again: neither draining nor cordoned
	cordonNode   nodeAction = "node.cordon"   // no new jobs; running ones keep running
	uncordonNode nodeAction = "node.uncordon" // ready again: neither cordoned nor draining
)

// done says what became of the machine, for answers: "draining".
func (a nodeAction) done() string {
	switch a {
	case drainNode:
		return "draining"
	case resumeNode:
		return "resumed"
	case cordonNode:
		return "cordoned"
	}
	return "uncordoned"
}

// actOnNode applies action to the machine node, for an admin, and records
// it in the audit log. On a follower replica it records the change in the
// store, for the leader's next pass. Resume and uncordon both make the
// machine ready again.
func (s *Server) actOnNode(ctx context.Context, a actor, node string, action nodeAction) error {
	if a.user.Role != models.RoleAdmin {
		return echo.NewHTTPError(http.StatusForbidden, "only admins may do this")
	}
	var err error
	switch action {
	case drainNode:
		err = s.cfg.Engine.SetDraining(node, true)
	case cordonNode:
		err = s.cfg.Engine.SetCordoned(node, true)
	case resumeNode, uncordonNode:
		if err = s.cfg.Engine.SetDraining(node, false); err == nil {
			err = s.cfg.Engine.SetCordoned(node, false)
		}
	default:
		return fmt.Errorf("unknown node action %q", action)
	}
	if errors.Is(err, engine.ErrUnknownNode) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no node %q is connected", node))
	}
	if err != nil {
		return err
	}
	return s.auditBy(ctx, a, string(action), node, "")
}
