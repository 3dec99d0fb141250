package app

import (
	"cmp"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/models"
)

// The store's rows that app's actions and reads hand their callers, by
// app's names: the web server reads their fields and never reaches the
// store itself. They are models' types; answering with api's types
// instead, handler by handler, is what is left of issue 34's first step.
type (
	// User is an account, as the actor of an action (Actor.User).
	User = models.User
	// Job is a job as the store has it now.
	Job = models.Job
	// Team is a team with its share and policies.
	Team = models.Team
)

// AllSeeing is a viewer who may see every team (an admin): for what is
// made once for all viewers and then narrowed to what each may see.
func AllSeeing() *User { return &User{Role: models.RoleAdmin} }

// MeOf is u's account as GET /api/v1/me shows it.
func MeOf(u *User) api.Me {
	return api.Me{Name: u.Name, Role: string(u.Role), Team: u.Team,
		UnixName: cmp.Or(u.UnixName, u.Name), Source: cmp.Or(u.Source, models.SourceLocal)}
}
