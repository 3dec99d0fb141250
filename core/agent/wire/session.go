package wire

import "github.com/gpuportal/gpuportal/core/job"

// Interactive sessions (job.Session): a session's run serves HTTP on its
// machine's loopback interface only. The portal reaches it through the
// agent, and the server never dials a machine:
//
//  1. the server sends Dial (a request, answered by Ack) naming the run
//     and a one-time tunnel token;
//  2. the agent connects to the session's loopback port; if it cannot, it
//     answers the Dial with an error;
//  3. otherwise it opens a new connection to the server at TunnelPath,
//     presenting the tunnel token (TunnelTokenHeader) and asking to
//     upgrade to TunnelProtocol; the server answers 101 Switching
//     Protocols, and from then on the connection carries the session's
//     bytes both ways, unframed, until either side closes it;
//  4. the agent acknowledges the Dial.
//
// A tunnel token is 32 random bytes, valid once and for DialTimeout, and
// travels only over the agent's authenticated connection: it is the
// tunnel connection's credential.

// TypeDial asks the agent to open a tunnel to a session (server -> agent,
// answered by Ack).
const TypeDial Type = "dial"

// TunnelPath is where agents open tunnels to sessions.
const TunnelPath = "/api/v1/agents/tunnel"

// TunnelProtocol is the protocol a tunnel connection upgrades to.
const TunnelProtocol = "gpuportal-tunnel"

// TunnelTokenHeader carries the Dial's tunnel token.
const TunnelTokenHeader = "X-Gpuportal-Tunnel"

// Dial asks for a tunnel to the session of run Run of job JobID, or,
// with Files set, to job JobID's files (jobfiles): the agent then serves
// them on the tunnel itself. A files dial names run 0, which no session
// has, so that an agent from before Files refuses it.
type Dial struct {
	Node  string     `json:"node"`
	JobID int64      `json:"job_id"`
	Run   int64      `json:"run"`
	Token string     `json:"token"`
	Files *FilesDial `json:"files,omitempty"`
}

// FilesDial asks for a job's files, served as the account the job runs
// as: Account is its owner's Unix account (JobSpec.Account).
type FilesDial struct {
	Account string `json:"account"`
}

// Session is a run's interactive session (job.Session).
type Session struct {
	Type    string `json:"type"`
	Port    int    `json:"port,omitempty"`
	BaseURL string `json:"base_url"`
	Token   string `json:"token"`
}

// FromSession encodes a session; nil stays nil.
func FromSession(s *job.Session) *Session {
	if s == nil {
		return nil
	}
	return &Session{Type: string(s.Type), Port: s.Port, BaseURL: s.BaseURL, Token: s.Token}
}

// Session decodes a session; nil stays nil.
func (w *Session) Session() *job.Session {
	if w == nil {
		return nil
	}
	return &job.Session{Type: job.SessionType(w.Type), Port: w.Port, BaseURL: w.BaseURL, Token: w.Token}
}
