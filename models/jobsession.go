package models

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/gpuportal/gpuportal/core/job"
)

// NewSessionSecret returns a fresh random secret for a session's URL
// prefix: 32 random bytes, URL-safe.
func NewSessionSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("session secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// IsSession reports whether the job is an interactive session.
func (j *Job) IsSession() bool { return j.SessionType != "" }

// SessionPrefix is the path the portal serves the job's session under,
// /sessions/ID/SECRET/; empty for a batch job.
func (j *Job) SessionPrefix() string {
	if !j.IsSession() {
		return ""
	}
	return "/sessions/" + strconv.FormatInt(j.ID, 10) + "/" + j.SessionSecret + "/"
}

// Session is the job's session as machines start it; nil for a batch job.
func (j *Job) Session() *job.Session {
	if !j.IsSession() {
		return nil
	}
	return &job.Session{Type: job.SessionType(j.SessionType), Port: j.SessionPort, BaseURL: j.SessionPrefix(), Token: j.SessionToken}
}
