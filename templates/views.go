// Package templates renders the portal's pages with templ. Handlers pass
// view models defined here, never database rows.
package templates

// Page is what every page's frame needs.
type Page struct {
	Title  string
	Nav    string // the active navigation entry
	User   *User  // nil when nobody is logged in
	CSRF   string
	Flash  string
	Notice string
	Charts bool // the page draws live charts
}

// User is the logged-in user as the frame shows them.
type User struct {
	Name string
	Role string
	Team string
}

// JobRow is one job in a list.
type JobRow struct {
	ID        int64
	Name      string
	Team      string
	User      string
	GPUs      int
	State     string
	Workload  string // "sim 120s" or the command
	Submitted string
	Started   string
	Finished  string
	JCT       string
	Reason    string
	// Borrowed: it runs on GPUs lent by other teams and may be reclaimed.
	Borrowed bool
	// ETA is a waiting job's start forecast in a few characters, ETAText
	// in a sentence (api.Forecast); empty unless it waits.
	ETA, ETAText string
}

// JobDetail is the job page.
type JobDetail struct {
	JobRow
	Placement   string
	ExitCode    string
	Executed    string
	Attained    string
	Preemptions int
	Queue       int
	Model       string
	CanCancel   bool
	Log         string
	// Session is set for an interactive session job (web/sessions.go).
	Session *SessionView
	Final   bool
	History []Event
	// Estimate is when a waiting job should start; EstimateNote says how
	// it is made and how good past estimates were.
	Estimate     string
	EstimateNote string
	// Sharing says how a sharing job shares its GPU and its memory
	// estimate ("" for a job that does not share); Lane where it runs
	// now and with whom.
	Sharing string
	Lane    string
	// LiveMemory says why the live GPU memory of the machines the job
	// runs on is unknown (Slurm nodes without a monitor-only agent).
	LiveMemory string
	// Resources are a running job's CPUs and memory per node, Profile
	// where its sensitivity profile came from, ProfileCurve its chart.
	Resources    []ResourceRow
	Profile      string
	ProfileCurve ProfileCurve
	// DeclaredProfile is the sensitivity profile the user declared at
	// submission, in words; "" when none was.
	DeclaredProfile string
}

// Event is one step of a job's history.
type Event struct{ At, State, Detail string }

// JobList is the jobs page.
type JobList struct {
	Jobs   []JobRow
	Scope  string // "mine", "team" or "all"
	Scopes []string
	State  string
	States []string
}

// SubmitForm is the submit page, with what the user typed and what was wrong.
type SubmitForm struct {
	Name    string
	Team    string
	Teams   []string
	GPUs    string
	Kind    string // "sim", "command" or "session"
	Command string
	// SessionType and SessionPort are an interactive session's, as typed.
	SessionType string
	SessionPort string
	DurationS   string
	GPUMemGB    string
	Model       string
	Models      []string
	// Salus sharing: Sharing is the checkbox; the rest as typed.
	Sharing          bool
	GPUFraction      string
	MemPersistentMiB string
	MemEphemeralMiB  string
	BatchSize        string
	Parameters       string
	// Synergy: a declared profile, a catalogue family and curves as
	// typed (x:speed pairs, docs/synergy.md).
	CPUFamily string
	CPUCurve  string
	MemCurve  string
	Errors    map[string]string
	// Templates are the user's saved jobs; FromTemplate names the one
	// that filled this form.
	Templates    []TemplateRow
	FromTemplate string
}

// TemplateRow is one saved job.
type TemplateRow struct {
	ID   int64
	Name string
}

// GPUCard is one GPU on the cluster page.
type GPUCard struct {
	Index   int
	UUID    string // opens the GPU's detail chart
	Model   string
	UsedGB  string
	TotalGB string
	UsedPct int
	UtilPct int
	Jobs    string
	// Fault is what the GPU reported (XID, ECC) when it is out of
	// service; empty when healthy.
	Fault string
	// Lanes describes the GPU's Salus lanes, empty when it has none.
	Lanes string
}

// NodeCard is one machine on the cluster page.
type NodeCard struct {
	Name     string
	State    string // ready, cordoned, draining or drained
	CanDrain bool   // the viewer is an admin
	GPUs     []GPUCard
	// LiveMemory says why the GPUs' live memory is unknown (a Slurm node
	// without a monitor-only agent); empty when known.
	LiveMemory string
	// Resources says the CPUs and memory allocated to its jobs.
	Resources string
}

// Cluster is the cluster page.
type Cluster struct {
	Nodes  []NodeCard
	Counts []Count
}

// Count is a labelled number.
type Count struct {
	Label string
	N     int
}

// Admin is the admin page: users, teams and the audit log.
type Admin struct {
	Accounts Accounts
	Users    []UserRow
	Teams    []TeamRow
	Audit    []AuditRow
}

// UserRow is one user on the admin page: UnixName is the account their
// jobs run as, Source where they sign in (local, ldap, oidc).
type UserRow struct{ Name, Role, Team, UnixName, Source string }

// TeamRow is one team on the admin page.
type TeamRow struct {
	Name          string
	GuaranteeGPUs int
}

// AuditRow is one audit log entry.
type AuditRow struct{ At, Actor, Action, Target, Detail, From string }

// Tokens is the API tokens page. New is a token just made, shown once.
type Tokens struct {
	Tokens []TokenRow
	New    string
}

// TokenRow is one API token (its secret is never kept).
type TokenRow struct {
	ID                     int64
	Name, Created, Expires string
}

// Queues is the scheduler's queues page with the live JCT figures.
type Queues struct {
	Policy    string
	Queues    []Queue
	JCT       JCTStats
	Forecasts ForecastStats
}

// ForecastStats says how start forecasts are made and how good they have
// been, in sentences.
type ForecastStats struct {
	Calibration, Latest, Method string
}

// Queue is one priority queue.
type Queue struct {
	Index int
	Range string
	Jobs  []QueueJob
}

// QueueJob is one job in a queue; Visible is false for other teams' jobs.
type QueueJob struct {
	ID                                        int64
	Name, Team, User, State, Attained, Reason string
	GPUs                                      int
	Visible                                   bool
	// ETA is a waiting job's start forecast in a few characters, ETAText
	// in a sentence (api.Forecast).
	ETA, ETAText string
	Borrowed     bool
}

// JCTStats are the JCT figures of recently finished jobs.
type JCTStats struct {
	Window, Avg, P50, P95, P99 string
	Jobs                       int
	CDF                        [][2]float64 // (JCT seconds, fraction)
}

// TeamShareRow is a team's standing under fair share. InUse and
// Borrowed are GPUs, a shared GPU counted by the share each job holds.
type TeamShareRow struct {
	Name                                           string
	Guarantee, MaxPerUser                          int
	InUse, Borrowed                                string
	Weight, Usage, Entitlement, UsageShare, Factor string
}

// Team is a team's page.
type Team struct {
	Share        TeamShareRow
	Members      []MemberRow
	Samples      [][4]float64 // unix time, in use, borrowed, guarantee
	CanEditShare bool         // admins
	CanEditCaps  bool         // the team's lead and admins
	// Queue is the team's unfinished jobs, running ones first; the page
	// keeps it live over the team:<name> topic.
	Queue []TeamQueueRow
}

// TeamQueueRow is one of a team's unfinished jobs.
type TeamQueueRow struct {
	ID                int64
	Name, User, State string
	GPUs, Queue       int
	Attained          string
}

// MemberRow is one member of a team.
type MemberRow struct {
	User, Role, Usage string
	MaxGPUs           int
}

// SessionView is how the job page of a session says to open it.
type SessionView struct {
	// Type names what it serves: "Jupyter", "terminal", "web app".
	Type string
	// URL is where to open it; empty for those who may not, or while it
	// cannot be opened.
	URL string
	// Note says why it cannot be opened now, or how it is reached.
	Note string
}
