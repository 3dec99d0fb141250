package job

import "fmt"

// SessionType names what an interactive session serves.
type SessionType string

// The session types.
const (
	// SessionJupyter is a Jupyter server (JupyterLab where the machine has
	// it, else the classic notebook server).
	SessionJupyter SessionType = "jupyter"
	// SessionTerminal is a shell in a pseudo-terminal, drawn in the
	// browser by the portal.
	SessionTerminal SessionType = "terminal"
	// SessionWeb is any web app the user's command starts on a port
	// (TensorBoard, a VS Code server).
	SessionWeb SessionType = "web"
)

// SessionTypes are the session types, in the order the portal offers them.
var SessionTypes = []SessionType{SessionJupyter, SessionTerminal, SessionWeb}

// Valid reports whether t is a known session type.
func (t SessionType) Valid() bool {
	switch t {
	case SessionJupyter, SessionTerminal, SessionWeb:
		return true
	}
	return false
}

// StopLoses says, for people, what stopping a session of the type loses:
// no session can be checkpointed, and a stopped one starts afresh.
func (t SessionType) StopLoses() string {
	switch t {
	case SessionTerminal:
		return "a terminal cannot be checkpointed: its shell was ended, and it starts again with a new one"
	case SessionJupyter:
		return "Jupyter cannot be checkpointed: its kernels were ended (saved notebooks are kept), and it starts again with new ones"
	}
	return "a web app cannot be checkpointed: it was ended, and it starts again afresh"
}

// Session makes a run an interactive session: a server on the machine's
// loopback interface that the portal reaches through the agent
// (docs/portal.md, "Interactive sessions"). Its machine port is never
// exposed.
type Session struct {
	Type SessionType
	// Port is the loopback port a web app listens on, as its owner named
	// it; 0: the agent picks a free one and passes it as $PORT. Jupyter and
	// terminals always get one the agent picks.
	Port int
	// BaseURL is the path prefix the portal serves the session under
	// (/sessions/ID/SECRET/): Jupyter is started with it as its base URL,
	// and web apps get it as $GPUPORTAL_BASE_URL.
	BaseURL string
	// Token is the session's own credential: the portal's proxy presents
	// it on every request it forwards (Authorization: token T), and the
	// session's server requires it, so that other accounts on the machine
	// cannot use its loopback port. Jupyter gets it as $JUPYTER_TOKEN,
	// every session as $GPUPORTAL_SESSION_TOKEN; it never appears in a
	// command line.
	Token string
}

// Check reports what is wrong with a session, naming the field.
func (s *Session) Check() error {
	if !s.Type.Valid() {
		return fmt.Errorf("session type %q: want jupyter, terminal or web", s.Type)
	}
	if s.Port < 0 || s.Port > 65535 {
		return fmt.Errorf("session port %d: want 1 to 65535, or 0 for one the agent picks", s.Port)
	}
	return nil
}
