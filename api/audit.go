package api

import "time"

// AuditEntry is one action recorded in the audit log: who did what to
// which object, from where.
type AuditEntry struct {
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Detail string    `json:"detail"`
	From   string    `json:"from"` // the client's address, or "cli"
}
