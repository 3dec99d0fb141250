package api

// Session is an interactive session job's session (docs/portal.md): what
// it serves and, for its owner and admins only, where to open it.
type Session struct {
	// Type is jupyter, terminal or web.
	Type string `json:"type"`
	// Port is the loopback port a web app listens on, as its owner named
	// it; 0 when the agent picks one.
	Port int `json:"port,omitempty"`
	// URL is the session's address on the portal, /sessions/ID/SECRET/:
	// shown only to its owner and admins, and opened only by them.
	URL string `json:"url,omitempty"`
	// Priority: the session asked for interactive priority, ahead of its
	// team's other waiting jobs within the GPUs its team allows.
	Priority bool `json:"priority,omitempty"`
}
