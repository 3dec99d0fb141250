package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// The actions on jobs: submit (a job or an array), cancel (a job or an
// array), resubmit, keep alive. Each reads the job as the store has it
// now and checks that the actor may act on it: a job of a team the actor
// may not see is one that does not exist (NotFound); one the actor sees
// but may not change is Forbidden.

// CheckSubmit checks req as a submission of a, without storing it: nil,
// or an Invalid *Error with every field at fault.
func (s *App) CheckSubmit(ctx context.Context, a Actor, req api.SubmitRequest) error {
	_, err := s.checkSubmit(ctx, a, req)
	return err
}

// checkSubmit validates req for a and returns the job it would store.
func (s *App) checkSubmit(ctx context.Context, a Actor, req api.SubmitRequest) (*models.Job, error) {
	teams, err := s.teamNames(ctx)
	if err != nil {
		return nil, err
	}
	j, fe := validate(a.User, req, teams, s.clusterGPUs())
	if fe == nil {
		fe = FieldErrors{}
	}
	if j != nil {
		tasks := 1
		if sp := spec(req, FieldErrors{}); sp.array != nil {
			tasks = len(sp.array.Indices)
		}
		if err := s.checkJobLimits(ctx, a.User, j, tasks, fe); err != nil {
			return nil, stored(err)
		}
	}
	if _, bad := fe["image"]; !bad && req.Image != "" && !s.cfg.AllowedImages.Allows(req.Image) {
		fe["image"] = s.cfg.AllowedImages.Refusal(req.Image)
	}
	if len(fe) > 0 {
		return nil, invalidFields(fe)
	}
	return j, nil
}

// TeamNames lists every team's name.
func (s *App) teamNames(ctx context.Context) ([]string, error) {
	ts, err := s.cfg.Store.Teams(ctx)
	if err != nil {
		return nil, stored(err)
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names, nil
}

// clusterGPUs is the number of GPUs connected now.
func (s *App) clusterGPUs() int {
	n := 0
	for _, node := range s.cfg.Engine.Nodes() {
		n += len(node.Devices())
	}
	return n
}

// Submit validates req for a and stores the job, or an array's tasks
// (returning the first); when req is not valid it stores nothing and
// returns an Invalid *Error with every field at fault.
func (s *App) Submit(ctx context.Context, a Actor, req api.SubmitRequest) (*Job, error) {
	return viewOrNil(s.submitJob(ctx, a, req))
}

// submitJob is Submit's row.
func (s *App) submitJob(ctx context.Context, a Actor, req api.SubmitRequest) (*models.Job, error) {
	j, _, err := s.submitOnce(ctx, a, "", req)
	return j, err
}

// MaxIdempotencyKey is the longest Idempotency-Key a submission may carry.
const MaxIdempotencyKey = 255

// SubmitOnce is Submit for a client that may retry: a submission with a
// key a's earlier one carried returns that job (replayed) instead of a
// second one, whenever it was stored, also when the answer to the first
// was lost; the same key with another request is a Conflict. key "" is
// Submit.
func (s *App) SubmitOnce(ctx context.Context, a Actor, key string, req api.SubmitRequest) (*Job, bool, error) {
	j, replayed, err := s.submitOnce(ctx, a, key, req)
	v, err := viewOrNil(j, err)
	return v, replayed, err
}

// submitOnce is SubmitOnce's row.
func (s *App) submitOnce(ctx context.Context, a Actor, key string, req api.SubmitRequest) (j *models.Job, replayed bool, err error) {
	var digest string
	if key != "" {
		if len(key) > MaxIdempotencyKey || strings.IndexFunc(key, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
			return nil, false, invalid("Idempotency-Key", "Idempotency-Key: want 1 to %d printable ASCII characters without spaces", MaxIdempotencyKey)
		}
		b, err := json.Marshal(req)
		if err != nil {
			return nil, false, fmt.Errorf("submission digest: %w", err)
		}
		sum := sha256.Sum256(b)
		digest = hex.EncodeToString(sum[:])
		if j, err := s.submitted(ctx, a, key, digest); j != nil || err != nil {
			return j, j != nil, err
		}
	}
	j, err = s.submit(ctx, a, req, key, digest)
	if key != "" && errors.Is(err, models.ErrExists) {
		// The same key raced in from another request of a's: its job.
		j, err = s.submitted(ctx, a, key, digest)
		return j, j != nil, err
	}
	return j, false, err
}

// submitted returns a's job submitted with key, nil if none; a Conflict
// when it was submitted with another request.
func (s *App) submitted(ctx context.Context, a Actor, key, digest string) (*models.Job, error) {
	j, err := s.cfg.Store.JobByIdempotencyKey(ctx, a.User.Name, key)
	if errors.Is(err, models.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, stored(err)
	}
	if j.RequestDigest != digest {
		return nil, conflict("Idempotency-Key %q was used for another submission (job %d): a new submission needs a new key", key, j.ID)
	}
	return j, nil
}

// createErr is what a submission of team's fails with where storing it
// failed: a refusal where the team's cap was reached, or its sessions
// turned off, meanwhile (models.OverCapError, models.ErrSessionsOff), as
// validation says it.
func createErr(team string, err error) error {
	var over *models.OverCapError
	switch {
	case errors.As(err, &over):
		field, msg := overCap(over)
		return invalidFields(FieldErrors{field: msg})
	case errors.Is(err, models.ErrSessionsOff):
		return invalidFields(FieldErrors{"session": sessionsOff(team)})
	}
	return stored(err)
}

func (s *App) submit(ctx context.Context, a Actor, req api.SubmitRequest, key, digest string) (*models.Job, error) {
	j, err := s.checkSubmit(ctx, a, req)
	if err != nil {
		return nil, err
	}
	j.SubmittedAt = s.cfg.Now()
	j.IdempotencyKey, j.RequestDigest = key, digest
	if j.IsSession() {
		if j.SessionSecret, err = models.NewSessionSalt(); err != nil {
			return nil, err
		}
	}
	// A team's session policy and its caps on its sessions' and
	// high-priority jobs' GPUs, which validation checked, are read and
	// checked again in the transaction that stores the job
	// (models.Store.CreateJobWithin), so that submissions at once, to this
	// server or another replica, do not pass a cap together, and none
	// passes a policy changed since validation.
	capped := j.IsSession() || j.Priority == job.PriorityHigh
	c := models.TeamCap{Team: j.Team, Sessions: j.IsSession()}
	if tasks := spec(req, FieldErrors{}).tasks(j); tasks != nil {
		for _, t := range tasks[1:] {
			t.IdempotencyKey, t.RequestDigest = "", "" // the array is its first task's
		}
		if capped {
			err = s.cfg.Store.CreateArrayWithin(ctx, tasks, c)
		} else {
			err = s.cfg.Store.CreateArray(ctx, tasks)
		}
		if err != nil {
			return nil, createErr(j.Team, err)
		}
		j = tasks[0]
		s.cfg.Logger.Info("array submitted", "array", j.ArrayID, "tasks", len(tasks), "limit", j.ArrayLimit, "user", j.User, "team", j.Team)
	} else {
		if capped {
			err = s.cfg.Store.CreateJobWithin(ctx, j, c)
		} else {
			err = s.cfg.Store.CreateJob(ctx, j)
		}
		if err != nil {
			return nil, createErr(j.Team, err)
		}
	}
	s.cfg.Engine.Wake()
	s.cfg.Logger.Info("job submitted", "job", j.ID, "user", j.User, "team", j.Team, "gpus", j.GPUs)
	return j, nil
}

// Cancel cancels job id for a and returns it as it is afterwards (a
// running job may still be stopping): for its owner, its team's lead or
// an admin.
func (s *App) Cancel(ctx context.Context, a Actor, id int64) (*Job, error) {
	return viewOrNil(s.cancel(ctx, a, id))
}

// cancel is Cancel's row.
func (s *App) cancel(ctx context.Context, a Actor, id int64) (*models.Job, error) {
	j, err := s.job(ctx, a, id)
	if err != nil {
		return nil, err
	}
	if !mayCancel(a.User, j) {
		return nil, forbidden("job %d belongs to %s: only its owner, the lead of %s or an admin may cancel it", j.ID, j.User, j.Team)
	}
	if j.State.Final() {
		return nil, conflict("job %d has already ended (%s)", j.ID, j.State)
	}
	err = s.cfg.Engine.Cancel(ctx, j.ID, "cancelled by "+a.User.Name)
	if errors.Is(err, models.ErrConflict) {
		return nil, conflict("job %d has already ended", j.ID)
	}
	if err != nil {
		return nil, stored(err)
	}
	s.cfg.Logger.Info("job cancel requested", "job", j.ID, "by", a.User.Name)
	if a.User.Name != j.User {
		if err := s.audit(ctx, a, "job.cancel", fmt.Sprintf("job %d of %s", j.ID, j.User), ""); err != nil {
			return nil, err
		}
	}
	j, err = s.cfg.Store.Job(ctx, j.ID)
	return j, stored(err)
}

// CancelArray cancels every unfinished task of array id for a, and
// returns how many it asked to cancel: for the array's owner, its team's
// lead or an admin.
func (s *App) CancelArray(ctx context.Context, a Actor, id int64) (int, error) {
	tasks, err := s.array(ctx, a, id)
	if err != nil {
		return 0, err
	}
	if !mayCancel(a.User, &tasks[0]) {
		return 0, forbidden("array %d belongs to %s: only its owner, the lead of %s or an admin may cancel it", id, tasks[0].User, tasks[0].Team)
	}
	n := 0
	for _, t := range tasks {
		if t.State.Final() {
			continue
		}
		err := s.cfg.Engine.Cancel(ctx, t.ID, fmt.Sprintf("cancelled with array %d by %s", id, a.User.Name))
		if errors.Is(err, models.ErrConflict) {
			continue // it ended meanwhile
		}
		if err != nil {
			return n, stored(err)
		}
		n++
	}
	s.cfg.Logger.Info("array cancel requested", "array", id, "tasks", n, "by", a.User.Name)
	if a.User.Name != tasks[0].User {
		if err := s.audit(ctx, a, "array.cancel", fmt.Sprintf("array %d of %s", id, tasks[0].User), fmt.Sprintf("%d tasks", n)); err != nil {
			return n, err
		}
	}
	return n, nil
}

// Resubmit submits job id again, with its fields as they were: a new
// job of the same owner, which runs as its owner, whoever asks, as
// Slurm's scontrol requeue keeps a job's owner. Its owner, its team's
// lead or an admin may ask (as they may cancel it); the submission is
// checked as the owner's (team, caps), and one by another than the
// owner is recorded in the audit log. A job never runs another's
// command under the account of whoever clicked.
func (s *App) Resubmit(ctx context.Context, a Actor, id int64) (*Job, error) {
	return viewOrNil(s.resubmit(ctx, a, id))
}

// resubmit is Resubmit's row.
func (s *App) resubmit(ctx context.Context, a Actor, id int64) (*models.Job, error) {
	j, err := s.job(ctx, a, id)
	if err != nil {
		return nil, err
	}
	if !mayCancel(a.User, j) {
		return nil, forbidden("job %d is %s's: only its owner, the lead of %s or an admin may resubmit it", j.ID, j.User, j.Team)
	}
	owner := a.User
	if j.User != a.User.Name {
		row, err := s.cfg.Store.UserByName(ctx, j.User)
		if errors.Is(err, models.ErrNotFound) {
			return nil, conflict("job %d's owner %s has no account any more: it cannot run as them again", j.ID, j.User)
		}
		if err != nil {
			return nil, stored(err)
		}
		if owner = userView(row); owner.Disabled() {
			return nil, conflict("job %d's owner %s is disabled: it cannot run as them again", j.ID, j.User)
		}
	}
	nj, err := s.submitJob(ctx, Actor{User: owner, From: a.From}, requestOf(j))
	if err != nil {
		return nil, err
	}
	if owner.Name != a.User.Name {
		s.cfg.Logger.Info("job resubmitted for its owner", "job", j.ID, "as", nj.ID, "owner", owner.Name, "by", a.User.Name)
		if err := s.audit(ctx, a, "job.resubmit", fmt.Sprintf("job %d of %s", j.ID, owner.Name), fmt.Sprintf("as job %d, %s's", nj.ID, owner.Name)); err != nil {
			return nil, err
		}
	}
	return nj, nil
}

// KeepAlive keeps running job id from being reclaimed for the next
// req.Hours hours, for its owner, its team's lead or an admin, within its
// team's maximum keep-alive; audited. It returns the job as it is
// afterwards.
func (s *App) KeepAlive(ctx context.Context, a Actor, id int64, req api.KeepAliveRequest) (*Job, error) {
	return viewOrNil(s.keepAlive(ctx, a, id, req))
}

// keepAlive is KeepAlive's row.
func (s *App) keepAlive(ctx context.Context, a Actor, id int64, req api.KeepAliveRequest) (*models.Job, error) {
	j, err := s.job(ctx, a, id)
	if err != nil {
		return nil, err
	}
	if !mayCancel(a.User, j) {
		return nil, forbidden("job %d belongs to %s: only its owner, the lead of %s or an admin may keep it alive", j.ID, j.User, j.Team)
	}
	limit := s.maxKeepAlive(ctx, j.Team)
	hours := req.Hours
	// Compared as hours before any conversion: 1e300 hours made a
	// negative duration, and 1e-300 a keep-alive of nothing.
	switch {
	case hours > limit.Hours():
		return nil, invalid("hours", "hours %v: more than team %s's maximum keep-alive of %v hours", hours, j.Team, limit.Hours())
	case !(hours > 0) || hours*3600 < 1:
		return nil, invalid("hours", "hours %v: want at least 1 second (0.0003 hours), at most team %s's maximum keep-alive of %v hours", hours, j.Team, limit.Hours())
	}
	if j.State != job.Running {
		return nil, conflict("job %d is not running (%s): only a running job can be kept alive", j.ID, j.State)
	}
	until := s.cfg.Now().Add(time.Duration(hours * float64(time.Hour)))
	if err := s.cfg.Store.SetKeepAlive(ctx, j.ID, until); err != nil {
		if errors.Is(err, models.ErrConflict) {
			return nil, conflict("job %d has ended", j.ID)
		}
		return nil, stored(fmt.Errorf("keep job %d alive: %w", j.ID, err))
	}
	if err := s.audit(ctx, a, "job.keep-alive", fmt.Sprintf("job %d of %s", j.ID, j.User), "until "+until.UTC().Format(time.RFC3339)); err != nil {
		return nil, err
	}
	s.cfg.Logger.Info("job kept alive", "job", j.ID, "by", a.User.Name, "until", until)
	j, err = s.cfg.Store.Job(ctx, j.ID)
	return j, stored(err)
}

// maxKeepAlive is the longest keep-alive team allows, read from the
// store now; the default where the team cannot be read.
func (s *App) maxKeepAlive(ctx context.Context, team string) time.Duration {
	t, err := s.cfg.Store.Team(ctx, team)
	if err != nil {
		s.cfg.Logger.Warn("idle terms: read team", "team", team, "err", err)
		return models.DefaultMaxKeepAlive
	}
	return t.MaxKeepAlive()
}
