package api

import "time"

// JoinToken is a token that lets agents register new machines, as admins
// see it: the token itself is shown once, when created (NewJoinToken).
type JoinToken struct {
	ID        int64      `json:"id"`
	Name      string     `json:"name"`
	Active    bool       `json:"active"`
	Machines  int        `json:"machines"` // machines that joined with it
	CreatedBy string     `json:"created_by"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// NewJoinToken answers the creation of a join token: the token, once.
type NewJoinToken struct {
	Token     string    `json:"token"`
	JoinToken JoinToken `json:"join_token"`
}

// Machine is a machine an agent registered.
type Machine struct {
	Name string `json:"name"`
	// JoinedWith is the join token it joined with; 0: the server's
	// --agent-token.
	JoinedWith int64     `json:"joined_with"`
	CreatedAt  time.Time `json:"created_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
}

// JoinTokenRequest is the body of POST /join-tokens.
type JoinTokenRequest struct {
	Name string `json:"name"`
	// TTLS is how many seconds the token lets machines join; absent: a
	// day; 0: until revoked.
	TTLS *int64 `json:"ttl_s"`
}
