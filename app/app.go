// Package app holds what gpuportal's users and admins do: each action is
// a function of the actor who asks and a request of package api, which
// checks, from the store as it is now, that the actor may act on that
// job, machine or team, makes the change, records it in the audit log,
// and returns the result or a typed *Error (not found, forbidden,
// invalid with the field at fault, conflict, unavailable). The web
// handlers (the HTML forms and the REST API alike) only parse, call one
// action and render; they never decide who may do what.
//
// app knows no HTTP: it imports neither web, echo, templ nor net/http.
package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// Store is what the actions read and write; *models.Store is one.
type Store interface {
	JobStore
	TeamStore
	AccountStore
	PeopleStore
	MachineStore
	LiveStore
	JobReadStore
	FileStore
	UsageStore
	Audit(ctx context.Context, e models.AuditEntry) error
}

// JobStore is what the actions on jobs read and write.
type JobStore interface {
	Job(ctx context.Context, id int64) (*models.Job, error)
	ArrayTasks(ctx context.Context, id int64) ([]models.Job, error)
	CreateJob(ctx context.Context, j *models.Job) error
	CreateArray(ctx context.Context, tasks []*models.Job) error
	JobByIdempotencyKey(ctx context.Context, user, key string) (*models.Job, error)
	SetKeepAlive(ctx context.Context, id int64, until time.Time) error
}

// TeamStore is what the actions on teams read and write.
type TeamStore interface {
	Team(ctx context.Context, name string) (*models.Team, error)
	Teams(ctx context.Context) ([]models.Team, error)
	CreateTeam(ctx context.Context, name string, guaranteeGPUs int) (*models.Team, error)
	SetTeamShare(ctx context.Context, name string, guaranteeGPUs int, weight float64, maxGPUsPerUser int) error
	SetUserCap(ctx context.Context, team, user string, maxGPUs int) error
	SetTeamTimeLimits(ctx context.Context, name string, defaultS, maxS int64) error
	SetTeamIdlePolicy(ctx context.Context, name string, p models.IdlePolicy) error
	SetTeamSessionPolicy(ctx context.Context, name string, p models.SessionPolicy) error
	SetTeamBatchPolicy(ctx context.Context, name string, p models.BatchPolicy) error
	HighPriorityGPUs(ctx context.Context, team string) (int, error)
	SessionGPUs(ctx context.Context, team string) (int, error)
	CreateJobWithin(ctx context.Context, j *models.Job, c models.TeamCap) error
	CreateArrayWithin(ctx context.Context, tasks []*models.Job, c models.TeamCap) error
}

// AccountStore is what the actions on accounts and their API tokens
// read and write.
type AccountStore interface {
	UserByName(ctx context.Context, name string) (*models.User, error)
	Users(ctx context.Context) ([]models.User, error)
	CreateUser(ctx context.Context, name, password string, role models.Role, team string) (*models.User, error)
	SetRole(ctx context.Context, name string, role models.Role, team string) error
	SetPassword(ctx context.Context, name, password string) error
	SetUnixName(ctx context.Context, name, unix string) error
	DisableUser(ctx context.Context, name, admin string, now time.Time) (int, error)
	EnableUser(ctx context.Context, name string, now time.Time) (int, error)
	DeleteUser(ctx context.Context, name, admin string, now time.Time) (int, error)
	UserTokens(ctx context.Context, name string, now time.Time) ([]models.APIToken, error)
	RevokeUserToken(ctx context.Context, name string, id int64) error
}

// MachineStore is what the actions on join tokens and registered
// machines read and write.
type MachineStore interface {
	JoinTokens(ctx context.Context) ([]models.JoinToken, error)
	CreateJoinToken(ctx context.Context, name, by string, now time.Time, ttl time.Duration) (string, *models.JoinToken, error)
	RevokeJoinToken(ctx context.Context, id int64, now time.Time) error
	Machines(ctx context.Context) ([]models.Machine, error)
	RemoveMachine(ctx context.Context, name string) error
}

// Engine is the part of the scheduling engine the actions drive;
// *engine.Engine is one.
type Engine interface {
	// Wake starts a scheduling pass soon (a job was submitted).
	Wake()
	Cancel(ctx context.Context, id int64, reason string) error
	Nodes() []engine.Node
	SetDraining(node string, on bool) error
	SetCordoned(node string, on bool) error
	ClearGPUFault(node string, index int) error
	GPUFaults() []engine.GPUFault
	StoredNodeStates(ctx context.Context) (engine.NodeStates, error)
	ClusterEngine
	ReclaimEngine
	JobEngine
}

// Config is what an App works with.
type Config struct {
	Store  Store
	Engine Engine
	Logger *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// AllowedImages are the prefixes of the container images jobs may
	// name; empty: any.
	AllowedImages job.ImagePrefixes
	// Leader reports whether this replica runs the machines; nil: it
	// always does.
	Leader func() bool
	// Idle is the server's rule for when a running job holds its GPUs
	// idle, which a team's own rule overrides field by field; the zero
	// Rule is idle.DefaultRule, and After 0 turns the flag off for teams
	// that set no idle time.
	Idle idle.Rule
	// Telemetry gives the GPUs' live readings, which a job's use of its
	// GPUs and its idle verdict read before the stored history; nil:
	// none (the stored history only).
	Telemetry Readings
	// ReclaimGrace is how long an idle job is warned before the leader
	// stops it (serve --idle-reclaim-grace); 0: idle jobs are never
	// reclaimed.
	ReclaimGrace time.Duration
	// AccessChanged is called after a change that ends or narrows
	// someone's access (a role, a password, an account disabled, a token
	// revoked), so that live connections check theirs again at once;
	// nil: nothing is told.
	AccessChanged func()
	// Heard gives the remote machines' heartbeat ages at now (hub.Hub's
	// HeartbeatAges), so that a running job on a machine gone silent says
	// since when it is known to run; nil: every connected machine is heard.
	Heard func(now time.Time) map[string]time.Duration
	// Copies gives the server's copies of a job's checkpoint folders, one
	// per part (hub.Hub's CheckpointCopiesOf); nil: none are kept.
	Copies func(jobID int64) []job.CheckpointCopy
}

// Signal is an AccessChanged that signals ch without waiting: one
// signal pending is enough for the receiver (a web server's
// Config.AccessChanged) to check every live connection again.
func Signal(ch chan<- struct{}) func() {
	return func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// App runs the actions.
type App struct {
	cfg Config
	// idle keeps the lists' idle verdicts a little while (usage.go).
	idle idleCache
	// orders keeps the queues' order while the jobs and places are the
	// same (queueorder.go).
	orders orderCache
}

// New returns an App over cfg.
func New(cfg Config) *App {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Idle == (idle.Rule{}) {
		cfg.Idle = idle.DefaultRule
	}
	if cfg.Telemetry == nil {
		cfg.Telemetry = noReadings{}
	}
	if cfg.AccessChanged == nil {
		cfg.AccessChanged = func() {}
	}
	return &App{cfg: cfg}
}

// Actor is who asks for an action, and from where (the audit log).
type Actor struct {
	User *User
	// From is the client's address.
	From string
}

// CanSee reports whether u may read jobs of team: an admin, or a
// member of team.
func CanSee(u *User, team string) bool {
	return u.Role == RoleAdmin || u.Team == team
}

// CanCancel reports whether u may cancel j (and resubmit it, keep it
// alive): its owner, its team's lead, an admin.
func CanCancel(u *User, j *Job) bool { return mayCancel(u, &j.row) }

// mayCancel is CanCancel for a row.
func mayCancel(u *User, j *models.Job) bool {
	return u.Role == RoleAdmin || u.Name == j.User || (u.Role == RoleLead && u.Team == j.Team)
}

// audit records an action of a in the audit log.
func (s *App) audit(ctx context.Context, a Actor, action, target, detail string) error {
	return stored(s.cfg.Store.Audit(ctx, models.AuditEntry{
		At: s.cfg.Now(), Actor: a.User.Name, Action: action, Target: target, Detail: detail, From: a.From,
	}))
}

// stored is err, a store's, as an Unavailable *Error when the store
// cannot save now.
func stored(err error) error {
	if err != nil && models.Unavailable(err) {
		return &Error{Kind: Unavailable, Msg: "the store cannot save right now", Err: err, store: true}
	}
	return err
}

// Job returns job id as the store has it now if a may see it; one of a
// team a may not see is one that does not exist.
func (s *App) Job(ctx context.Context, a Actor, id int64) (*Job, error) {
	j, err := s.job(ctx, a, id)
	if err != nil {
		return nil, err
	}
	return jobView(j), nil
}

// job is Job's row.
func (s *App) job(ctx context.Context, a Actor, id int64) (*models.Job, error) {
	j, err := s.cfg.Store.Job(ctx, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, notFound("job", id)
	}
	if err != nil {
		return nil, stored(err)
	}
	if !CanSee(a.User, j.Team) {
		return nil, notFound("job", id)
	}
	return j, nil
}

// Array returns the tasks of array id, by index, if a may see them.
func (s *App) Array(ctx context.Context, a Actor, id int64) ([]Job, error) {
	tasks, err := s.array(ctx, a, id)
	return jobViews(tasks), err
}

// array is Array's rows.
func (s *App) array(ctx context.Context, a Actor, id int64) ([]models.Job, error) {
	tasks, err := s.cfg.Store.ArrayTasks(ctx, id)
	if err != nil {
		return nil, stored(err)
	}
	if len(tasks) == 0 || !CanSee(a.User, tasks[0].Team) {
		return nil, notFound("array", id)
	}
	return tasks, nil
}

// CheckpointCopies are the server's copies of job id's checkpoint
// folders, which a run of the job on another machine resumes from
// (docs/agents.md, "Resuming on another machine"): one per part, by part;
// none when the server keeps none. The caller has checked that its actor
// may see the job.
func (s *App) CheckpointCopies(id int64) []api.CheckpointCopy {
	if s.cfg.Copies == nil {
		return nil
	}
	var out []api.CheckpointCopy
	for _, c := range s.cfg.Copies(id) {
		out = append(out, api.CheckpointCopy{Part: c.Part, Run: c.Run, Node: c.Node, WrittenAt: c.At.UTC(), Bytes: c.Bytes})
	}
	return out
}
