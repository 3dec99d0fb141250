package api

import "time"

// User is an account as admins see it.
type User struct {
	Name string `json:"name"`
	Role string `json:"role"`
	Team string `json:"team"`
	// Disabled: an admin disabled the account (when, by whom): it cannot
	// log in, its sessions ended and its tokens are refused.
	Disabled   bool       `json:"disabled"`
	DisabledAt *time.Time `json:"disabled_at"`
	DisabledBy string     `json:"disabled_by"`
	CreatedAt  time.Time  `json:"created_at"`
	// UnixName is the Unix account the user's jobs run as.
	UnixName string `json:"unix_name"`
	// Source is where the account signs in: local, ldap or oidc.
	Source string `json:"source"`
}

// SetUnixName is the body of PUT /users/{name}/unix-name.
type SetUnixName struct {
	UnixName string `json:"unix_name"`
}

// APIToken is a user's API token as its owner and admins see it: its
// secret is never kept, so never shown after it is made.
type APIToken struct {
	ID        int64     `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	// LastUsedAt is when it last authenticated a request, to within a
	// minute; absent: never.
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
}

// AccountChange answers a change an admin made to an account: the
// account as it is now, and how many of its waiting jobs were held or
// released.
type AccountChange struct {
	User User `json:"user"`
	// HeldJobs: waiting jobs held by a disable or delete; ReleasedJobs:
	// held jobs released by an enable.
	HeldJobs     int `json:"held_jobs"`
	ReleasedJobs int `json:"released_jobs"`
}

// Me is the user a request acts as: GET /api/v1/me.
type Me struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Team is empty for admins without a team.
	Team string `json:"team"`
	// UnixName is the Unix account the user's jobs run as.
	UnixName string `json:"unix_name"`
	// Source is where the account signs in: local, ldap or oidc.
	Source string `json:"source"`
}

// Token is an API token as POST /api/v1/tokens issues it: its secret,
// shown this once, its name and when it expires.
type Token struct {
	Token     string    `json:"token"`
	Name      string    `json:"name"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TokenRequest is the optional body of POST /api/v1/tokens: the new
// token's name (1 to 128 characters; absent: "api", with the program
// that asked, from its User-Agent).
type TokenRequest struct {
	Name string `json:"name,omitempty"`
}

// Error is what every /api/v1 route answers with a 4xx or 5xx status:
// a message that names the field at fault.
type Error struct {
	Error string `json:"error"`
}

// CreateUser is what the admin page's form makes an account of: a
// researcher or lead needs a team, an admin may have none.
type CreateUser struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	Team     string `json:"team"`
	Password string `json:"password"`
}

// SetRole is the admin page's form changing an account's role and team.
type SetRole struct {
	Role string `json:"role"`
	Team string `json:"team"`
}

// SetPassword is the admin page's form resetting an account's password.
type SetPassword struct {
	Password string `json:"password"`
}
