package app

import (
	"cmp"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/core/usage"
	"github.com/gpuportal/gpuportal/models"
)

// What app's actions and reads hand their callers besides api's values:
// its own views of the store's rows, with the fields the web server
// reads. A job's and a team's view keeps its row unexported, so that
// what a caller hands back (Moment.Job, JobUsage, TeamShare) converts
// from the whole row without reading it again; no caller sees a models
// type (cmd/gpuportal/layout_test.go, TestWebSeesNoRows).

// Role is what a user may do in the portal.
type Role string

// The roles, from least to most allowed.
const (
	RoleResearcher Role = Role(models.RoleResearcher)
	RoleLead       Role = Role(models.RoleLead)
	RoleAdmin      Role = Role(models.RoleAdmin)
)

// User is an account: the actor of an action (Actor.User), who signed
// in, who follows the live stream.
type User struct {
	ID   int64
	Name string
	Role Role
	// Team is the team the user belongs to; empty for admins.
	Team string
	// UnixName is the Unix account the user's jobs run as; "": the
	// login name.
	UnixName string
	// Source is where the account signs in: "local", "ldap" or "oidc".
	Source   string
	disabled bool
}

// userOf is u's view; nil for nil.
func userView(u *models.User) *User {
	if u == nil {
		return nil
	}
	return &User{ID: u.ID, Name: u.Name, Role: Role(u.Role), Team: u.Team, UnixName: u.UnixName,
		Source: u.Source, disabled: u.Disabled()}
}

// Disabled reports whether an admin disabled the account.
func (u *User) Disabled() bool { return u.disabled }

// AllSeeing is a viewer who may see every team (an admin): for what is
// made once for all viewers and then narrowed to what each may see.
func AllSeeing() *User { return &User{Role: RoleAdmin} }

// MeOf is u's account as GET /api/v1/me shows it.
func MeOf(u *User) api.Me {
	return api.Me{Name: u.Name, Role: string(u.Role), Team: u.Team,
		UnixName: cmp.Or(u.UnixName, u.Name), Source: cmp.Or(u.Source, models.SourceLocal)}
}

// Job is a job as the store has it now, with the fields the pages read;
// api.Job (Moment.Job) is the whole of it as the API shows it.
type Job struct {
	ID   int64
	Name string
	Team string
	User string
	GPUs int
	// State is where the job is in its life cycle, Reason why it waits
	// or why it ended.
	State       job.State
	Reason      string
	Image       string
	Model       string
	Env         []string // NAME=value
	Workdir     string
	Retries     int
	SubmittedAt time.Time
	StartedAt   *time.Time // first start
	ExitCode    *int
	// Run counts the job's runs; Placement is where the current or last
	// one runs ("node:index").
	Run       int64
	Placement []string
	// AttainedService is GPU-seconds over the ended runs (Service adds
	// the run in progress).
	AttainedService float64
	Preemptions     int
	// QueueIndex is the priority queue the scheduler last put the job in.
	QueueIndex int
	// ArrayID, ArrayIndex and ArrayLimit place an array task; ArrayID 0:
	// none.
	ArrayID    int64
	ArrayIndex int
	ArrayLimit int
	// SessionType is the kind of an interactive session; "": a batch job.
	SessionType string

	row models.Job
}

// jobOf is r's view.
func jobView(r *models.Job) *Job {
	j := &Job{}
	j.set(r)
	return j
}

func (j *Job) set(r *models.Job) {
	*j = Job{ID: r.ID, Name: r.Name, Team: r.Team, User: r.User, GPUs: r.GPUs, State: r.State, Reason: r.Reason,
		Image: r.Image, Model: r.Model, Env: r.Env, Workdir: r.Workdir, Retries: r.Retries,
		SubmittedAt: r.SubmittedAt, StartedAt: r.StartedAt, ExitCode: r.ExitCode, Run: r.Run, Placement: r.Placement,
		AttainedService: r.AttainedService, Preemptions: r.Preemptions, QueueIndex: r.QueueIndex,
		ArrayID: r.ArrayID, ArrayIndex: r.ArrayIndex, ArrayLimit: r.ArrayLimit, SessionType: r.SessionType, row: *r}
}

// viewOf is jobView(j), err; nil when j is.
func viewOrNil(j *models.Job, err error) (*Job, error) {
	if j == nil {
		return nil, err
	}
	return jobView(j), err
}

// jobsOf is the views of rs, in their order.
func jobViews(rs []models.Job) []Job {
	out := make([]Job, len(rs))
	for i := range rs {
		out[i].set(&rs[i])
	}
	return out
}

// rowsOf is the rows of js, in their order.
func rowsOf(js []Job) []models.Job {
	out := make([]models.Job, len(js))
	for i := range js {
		out[i] = js[i].row
	}
	return out
}

// IsSession reports whether the job is an interactive session.
func (j *Job) IsSession() bool { return j.SessionType != "" }

// Service is the time the job has run and the service it has attained
// as of now, the run in progress included.
func (j *Job) Service(now time.Time) usage.Service { return j.row.Service(now) }

// DeclaredProfile is the CPU and memory profile the job was submitted
// with; nil: none.
func (j *Job) DeclaredProfile() (*synergy.Profile, error) { return j.row.DeclaredProfile() }

// Team is a team with its share and policies, as the pages read it;
// api.TeamShare (Moment.TeamShare) and api.IdlePolicy (IdlePolicyOf)
// are the rest.
type Team struct {
	Name          string
	GuaranteeGPUs int
	// IdleBelowPct and IdleAfterS are the team's own rule for idle; 0:
	// the server's.
	IdleBelowPct float64
	IdleAfterS   int64

	row models.Team
}

// teamsOf is the views of ts, in their order.
func teamViews(ts []models.Team) []Team {
	out := make([]Team, len(ts))
	for i, t := range ts {
		out[i] = Team{Name: t.Name, GuaranteeGPUs: t.GuaranteeGPUs, IdleBelowPct: t.IdleBelowPct, IdleAfterS: t.IdleAfterS, row: t}
	}
	return out
}
