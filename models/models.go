// Package models holds gpuportal's persistent records and the Store that
// reads and writes them through gorm, on SQLite or PostgreSQL.
package models

import (
	"time"

	"github.com/gpuportal/gpuportal/core/idle"
)

// Role is what a user may do in the portal.
type Role string

// The roles, from least to most allowed.
const (
	RoleResearcher Role = "researcher"
	RoleLead       Role = "lead"
	RoleAdmin      Role = "admin"
)

// Valid reports whether r is one of the known roles.
func (r Role) Valid() bool {
	return r == RoleResearcher || r == RoleLead || r == RoleAdmin
}

// User is a person who logs in to the portal.
type User struct {
	ID           int64  `gorm:"primaryKey"`
	Name         string `gorm:"uniqueIndex;size:64;not null"`
	PasswordHash string `gorm:"not null"`
	Role         Role   `gorm:"size:16;not null"`
	Team         string `gorm:"size:64"` // the team the user belongs to; empty for admins
	CreatedAt    time.Time
	// DisabledAt, when set, is when an admin disabled the account: it
	// cannot log in, its sessions are gone, its tokens and sockets are
	// refused and its waiting jobs are held (accounts.go).
	DisabledAt *time.Time
	// DisabledBy is the admin who disabled it.
	DisabledBy string `gorm:"size:64"`
	// UnixName is the Unix account the user's jobs run as (see
	// Store.UnixName): the login name unless the directory, the identity
	// provider or an admin says otherwise.
	UnixName string `gorm:"size:64;default:''"`
	// Source is where the account signs in: SourceLocal (a password kept
	// here), SourceLDAP or SourceOIDC.
	Source string `gorm:"size:16;default:'local'"`
	// Subject names the account at its source: the LDAP entry's DN, or
	// the OpenID Connect issuer and subject. Empty for local accounts.
	Subject string `gorm:"size:512;default:''"`
}

// Disabled reports whether an admin disabled the account.
func (u *User) Disabled() bool { return u.DisabledAt != nil }

// Team is a group of users that shares a GPU guarantee.
type Team struct {
	ID            int64  `gorm:"primaryKey"`
	Name          string `gorm:"uniqueIndex;size:64;not null"`
	GuaranteeGPUs int    `gorm:"not null;default:0"`
	Weight        float64
	// MaxGPUsPerUser caps one member's running GPUs; 0 is no cap.
	MaxGPUsPerUser int
	// DefaultTimeLimitS is the time limit of a job submitted without one,
	// MaxTimeLimitS the longest a job may ask for; 0: none.
	DefaultTimeLimitS int64
	MaxTimeLimitS     int64
	// UsageGPUSeconds is the team's decayed usage as of UsageAt.
	UsageGPUSeconds float64
	UsageAt         time.Time
	// The team's idle-GPU reclaim policy (serve --idle-reclaim-grace):
	// IdleSpareSessions keeps its idle sessions from being reclaimed,
	// IdleReclaimBatch lets its idle batch jobs be preempted too, and
	// MaxKeepAliveS is the longest keep-alive its members may ask for at
	// once (0: DefaultMaxKeepAlive).
	IdleSpareSessions bool  `gorm:"not null;default:false"`
	IdleReclaimBatch  bool  `gorm:"not null;default:false"`
	MaxKeepAliveS     int64 `gorm:"not null;default:0"`
	// The team's own rule for "idle" (core/idle Rule): IdleBelowPct the
	// utilization threshold, in percent, IdleAfterS how long all of a
	// job's GPUs must stay under it; 0: the server's (serve --idle-below,
	// --idle-after).
	IdleBelowPct float64 `gorm:"not null;default:0"`
	IdleAfterS   int64   `gorm:"not null;default:0"`
	// The team's session policy: MaxSessionS is the longest its sessions
	// may run (their time limit; 0: no maximum), SessionPriorityGPUs how
	// many GPUs its sessions that ask for interactive priority may hold
	// with it (0: no priority).
	MaxSessionS         int64 `gorm:"not null;default:0"`
	SessionPriorityGPUs int   `gorm:"not null;default:0"`
	// SessionsOff keeps the team's members from starting sessions;
	// MaxSessionGPUs caps the GPUs its sessions may ask for at once,
	// waiting or running (0: no cap).
	SessionsOff    bool `gorm:"not null;default:false"`
	MaxSessionGPUs int  `gorm:"not null;default:0"`
	// BatchPriorities lists the batch priorities the team's members may
	// give their jobs, comma-separated ("high,normal,low"); "" is
	// DefaultBatchPriorities. HighPriorityGPUs caps the GPUs the team's
	// high-priority jobs may ask for at once, waiting or running; 0: no
	// cap.
	BatchPriorities  string `gorm:"size:32;not null;default:''"`
	HighPriorityGPUs int    `gorm:"not null;default:0"`
	CreatedAt        time.Time
}

// DefaultMaxKeepAlive is the longest keep-alive where a team sets none.
const DefaultMaxKeepAlive = 8 * time.Hour

// MaxKeepAlive is the longest keep-alive the team's members may ask for.
func (t *Team) MaxKeepAlive() time.Duration {
	if t.MaxKeepAliveS > 0 {
		return time.Duration(t.MaxKeepAliveS) * time.Second
	}
	return DefaultMaxKeepAlive
}

// IdleRule is the team's own rule for idle: zero fields where it set
// none (core/idle Rule.Override fills them in with the server's).
func (t *Team) IdleRule() idle.Rule {
	return idle.Rule{After: time.Duration(t.IdleAfterS) * time.Second, BelowPct: t.IdleBelowPct}
}

// UserCap caps the GPUs one member of a team may hold at once.
type UserCap struct {
	Team    string `gorm:"primaryKey;size:64"`
	User    string `gorm:"primaryKey;size:64"`
	MaxGPUs int    `gorm:"not null"`
}

// UserUsage is a user's decayed GPU usage within a team as of UsageAt:
// GPU-seconds held by the user's jobs of the team, each counted at
// 2^(-age/half-life), the team's half-life. Fair share inside a team
// orders the team's jobs by it.
type UserUsage struct {
	Team            string    `gorm:"primaryKey;size:64"`
	User            string    `gorm:"primaryKey;size:64"`
	UsageGPUSeconds float64   `gorm:"not null;default:0"`
	UsageAt         time.Time `gorm:"not null"`
}

// TableName keeps one row per team and user in user_usage.
func (UserUsage) TableName() string { return "user_usage" }

// TeamSample is where a team stood at one time: what its usage chart draws.
type TeamSample struct {
	ID   int64     `gorm:"primaryKey"`
	Team string    `gorm:"size:64;index:idx_team_sample,priority:1;not null"`
	At   time.Time `gorm:"index:idx_team_sample,priority:2;not null"`
	// InUseGPUs and BorrowedGPUs count a shared GPU by the share each
	// job holds of it (core/usage).
	InUseGPUs     float64
	BorrowedGPUs  float64
	GuaranteeGPUs int
}

// Session is a logged-in browser. Only a hash of the cookie's token is kept.
type Session struct {
	TokenHash string `gorm:"primaryKey;size:64"`
	UserID    int64  `gorm:"index;not null"`
	CreatedAt time.Time
	ExpiresAt time.Time `gorm:"index"`
}

// APIToken authenticates REST calls as a user. Only its hash is kept.
type APIToken struct {
	ID        int64  `gorm:"primaryKey"`
	TokenHash string `gorm:"uniqueIndex;size:64;not null"`
	UserID    int64  `gorm:"index;not null"`
	Name      string `gorm:"size:128"`
	CreatedAt time.Time
	ExpiresAt time.Time
	// LastUsedAt is when the token last authenticated a request, to
	// within TokenUseResolution; nil: never.
	LastUsedAt *time.Time
}
