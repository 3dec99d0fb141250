// Package templates renders the portal's pages with templ. Handlers pass
// view models defined here, never database rows.
package templates

import (
	"slices"
	"strconv"
)

// Page is what every page's frame needs.
type Page struct {
	Title  string
	Nav    string // the active navigation entry
	User   *User  // nil when nobody is logged in
	CSRF   string
	Flash  string
	Notice string
	// Warning is something the viewer should act on (not an error of
	// theirs): shown above the page.
	Warning string
	Charts  bool // the page draws live charts
	// StoredCharts says the server is a follower replica, which holds no
	// live readings (machines connect to the leader): the page's charts
	// draw the stored history, one point per GPU a minute, the last 10
	// minutes included.
	StoredCharts bool
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
	// Idle, IdleText: a running job whose GPUs sat idle (api.Idle), in a
	// few characters and in a sentence; empty unless flagged idle.
	Idle, IdleText string
	// ETA is a waiting job's start forecast in a few characters, ETAText
	// in a sentence (api.Forecast); empty unless it waits.
	ETA, ETAText string
	// Array, when set, makes the row an array's (ID is the array's):
	// ArraySummary counts its tasks by state.
	Array        int64
	ArraySummary string
}

// JobDetail is the job page.
// The ways a job page offers to run a job again (JobDetail.Resubmit).
const (
	ResubmitEdit    = "edit"
	ResubmitAsOwner = "owner"
)

type JobDetail struct {
	JobRow
	// Reclaimable says, for a borrowed job, when a team under its
	// guarantee may take the GPUs it borrows back; "" when it does not
	// borrow.
	Reclaimable string
	// HasRun: the job has started at least once; a job that has not
	// shows no memory chart, only a line saying so.
	HasRun      bool
	Placement   string
	ExitCode    string
	Executed    string
	Attained    string
	Preemptions int
	Queue       int
	Model       string
	// Image is the container image the command runs in; "" for a
	// command on the machine.
	Image     string
	CanCancel bool
	// Resubmit is how the viewer may run the job again: ResubmitEdit
	// (its owner: a form filled from it), ResubmitAsOwner (its team's
	// lead or an admin: the same job again, its owner's, run as its
	// owner), or "" (not at all).
	Resubmit string
	Log      string
	// LogMachines are the machines of a job on several: Log is the
	// first's (its rank 0), and each has its own output; nil for a job
	// on one.
	LogMachines []string
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
	// What it runs with: its own variables (NAME=VALUE), its working
	// folder, its time limit and what is left of it ("" without one),
	// its retries and the jobs it waits for ("" when none).
	Env          []string
	Workdir      string
	TimeLimit    string
	TimeLeft     string
	Retries      int
	Dependencies []DepLink
	// Priority is a batch job's priority within its team (high, normal,
	// low); "" for a session.
	Priority string
	// ArrayID and ArrayIndex place a task in its array (0: none).
	ArrayID    int64
	ArrayIndex int
	// Idle says that the job holds its GPUs idle and since when; "" when
	// it does not. Usage is its use of its GPUs over its run.
	Idle  string
	Usage JobUsage
	// Reclaim says when the portal stops the idle job ("" when it does
	// not), KeepAlive until when its owner keeps it alive ("" for none).
	Reclaim   string
	KeepAlive string
	// KeepAliveMaxH is the longest keep-alive, in hours, its viewer may
	// ask for; 0: the viewer cannot (not running, not theirs, or its
	// team's policy never reclaims it).
	KeepAliveMaxH float64
}

// DepLink is a job a job waits for: how, and the other job.
type DepLink struct {
	Kind  string
	JobID int64
	State string // the other job's (an array's: all its tasks'), "" when unknown
	Array bool   // JobID is an array's: shown as the array, with its page
}

// ArrayDetail is an array's page: its tasks, by index.
type ArrayDetail struct {
	ID        int64
	Name      string
	Team      string
	User      string
	Limit     string
	Summary   string
	CanCancel bool
	Final     bool // every task has ended
	Tasks     []ArrayTaskRow
}

// ArrayTaskRow is one task on its array's page.
type ArrayTaskRow struct {
	ID    int64
	Index int
	// Params are the task's variables that differ from task to task
	// (its row of the parameter table), NAME=VALUE.
	Params   string
	State    string
	Started  string
	JCT      string
	ExitCode string
	Reason   string
	Final    bool // it has ended
}

// JobUsage is a job's use of its GPUs over its run, per GPU.
type JobUsage struct {
	Span    string // "over the run (12m30s)"
	UtilAvg string // mean utilization of its GPUs, "—" when unknown
	GPUs    []GPUUsage
}

// GPUUsage is one GPU of a job's run, as its page shows it.
type GPUUsage struct {
	Name    string // "node-0:3"
	Util    string // the latest utilization, "—" when not running
	UtilAvg string // over the run
	Mem     string // the job's own memory now, or the GPU's, with what it is
	MemPeak string
	Shared  string // "" unless shared: with whom, and what the figures mean
	// Simulated says the GPU is simulated and what its figures are; "" on
	// a real GPU.
	Simulated string
	// UtilLine and MemLine are SVG polyline points of utilization and
	// memory (0 at the bottom, 100% or the GPU's memory at the top)
	// over the run, in a 300x60 box.
	UtilLine, MemLine string
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
	// The other filters as asked: Teams lists the teams to choose from
	// (admins only), Kinds the kinds of workload.
	Team, User, Queue, Kind, Q, Limit string
	Teams, Kinds                      []string
	// Query is the filters as a URL query; Self adds the page's cursor
	// (for the rows' refresh). Newer, Older and First link to the pages
	// around, "" where there is none.
	Query, Self         string
	Newer, Older, First string
}

// Filtered reports whether the list is narrowed beyond its scope.
func (l JobList) Filtered() bool {
	return l.State != "" || l.Team != "" || l.User != "" || l.Queue != "" || l.Kind != "" || l.Q != ""
}

// SubmitForm is the submit page, with what the user typed and what was wrong.
type SubmitForm struct {
	Name    string
	Team    string
	Teams   []string
	GPUs    string
	Kind    string // "sim", "command" or "session"
	Command string
	Image   string // the container image the command runs in
	// SessionType and SessionPort are an interactive session's, as typed.
	SessionType string
	SessionPort string
	// SessionPriority: the session asks for interactive priority.
	SessionPriority bool
	// SessionTerms say what each of the user's teams lets a session ask
	// for now (app.SessionTerms): a sentence a team.
	SessionTerms []string
	DurationS    string
	GPUMemGB     string
	Model        string
	Models       []string
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
	// FromJob is the job this form was filled from (resubmit); 0: none.
	// FromUser is its owner when that is not the viewer: submitted, the
	// form runs as the viewer, with what FromUser wrote.
	FromJob  int64
	FromUser string
	// What the job runs with, as typed: variables one NAME=VALUE a line,
	// its folder, its time limit, retries, dependencies as Slurm writes
	// them (afterok:41), an array (0-5%2) and its parameter table (CSV).
	Env          string
	Workdir      string
	TimeLimit    string
	Retries      string
	Dependencies string
	Array        string
	ArrayParams  string
	// Priority is a batch job's priority within its team: "" or
	// "normal", "high", "low".
	Priority string
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
	// State is "busy" (jobs are placed on it), "idle" or "unavailable",
	// by allocation, as /metrics gpuportal_gpus counts it.
	State string
	// Jobs names the jobs placed on it, with the share of a shared GPU
	// each holds; Memory the GPU memory each job has allocated so far.
	Jobs   string
	Memory string
	// Fault is what the GPU reported (XID, ECC) when it is out of
	// service; empty when healthy.
	Fault string
	// Lanes describes the GPU's Salus lanes, empty when it has none.
	Lanes string
	// Idle says which of its jobs hold it idle ("job 3 idle 34m"); "" for none.
	Idle string
	// Reserved says which waiting job the GPU is held for and when that
	// job is expected to start ("reserved for job 8, expected to start
	// 14:05–14:40"); "" when it is held for none.
	Reserved string
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
	// Heard, when set, says the server cannot hear the machine now and
	// since when ("last heard 42s ago: ..."): what the card shows is its
	// last known state.
	Heard string
}

// Cluster is the cluster page.
type Cluster struct {
	Nodes  []NodeCard
	Counts []Count
	// Idle lists the running jobs that hold their GPUs idle.
	Idle []IdleRow
	// Reserved lists the reservations of the scheduler's last pass, in
	// its order.
	Reserved []ReservedRow
	// Follower: this server is a follower replica, to which no machine
	// connects.
	Follower bool
}

// ReservedRow is a reservation: the GPUs held for a waiting job.
type ReservedRow struct {
	JobID int64
	GPUs  string // "GPUs node-3:0-7"; "8 GPUs" where none are named
	Text  string // "reserved for job 12, expected to start 14:05–14:40", as each GPU says
	// Backfill says which other jobs may start on the GPUs meanwhile.
	Backfill string
}

// IdleRow is a running job that holds its GPUs idle. Name and User are
// empty for a viewer who may not see the job's team.
type IdleRow struct {
	ID               int64
	Name, Team, User string
	GPUs             string // where it runs
	Short            string // "idle 34m"
	Text             string // since when, and the rule
	// Reclaim says when the portal stops it to give its GPUs to waiting
	// jobs, as its page says; "" where its team's policy does not.
	Reclaim string
}

// Count is a labelled number.
type Count struct {
	Label string
	N     int
}

// Admin is the admin page: users, teams and the audit log.
type Admin struct {
	// Accounts is the one table of users.
	Accounts Accounts
	Teams    []TeamRow
	Audit    []AuditRow
}

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
	LastUsed               string // "never" for a token not used yet
}

// Queues is the scheduler's queues page with the live JCT figures.
type Queues struct {
	// Query is the page's own query ("" or "?cursor=..."): its refresh
	// keeps the page it shows.
	Query     string
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
	// Total and Running count the queue's jobs; Jobs are those from From
	// to To (from 1). Next, when more follow, links the next page; First,
	// on a later page, the first.
	Total, Running, From, To int
	Next, First              string
	Jobs                     []QueueJob
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
	// Place is a waiting job's place in its queue, "1" the next to
	// start (api.QueueJob.Position); "" for the others.
	Place string
	// Priority is the job's class: high, normal, low or session
	// (PriorityClass).
	Priority string
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
	// DefaultTimeLimit and MaxTimeLimit are the time limits of the team's
	// jobs (job.FormatTimeLimit); "" when none.
	DefaultTimeLimit, MaxTimeLimit string
}

// Team is a team's page.
type Team struct {
	Share        TeamShareRow
	Members      []MemberRow
	Samples      [][4]float64 // unix time, in use, borrowed, guarantee
	SamplesAsOf  string       // the last sample's time (the page's moment)
	CanEditShare bool         // admins
	CanEditCaps  bool         // the team's lead and admins
	// ShowShares shows each member's fair share inside the team (the
	// team's lead and admins).
	ShowShares bool
	// Queue is the team's first unfinished jobs, running ones first, of
	// QueueTotal; the page keeps it live over the team:<name> topic.
	Queue      []TeamQueueRow
	QueueTotal int
	// Flags are the team's warnings: idle jobs and stranded ones.
	Flags TeamFlags
	// Idle is the team's idle-GPU policy.
	Idle TeamIdle
	// Sessions is the team's session policy.
	Sessions TeamSessions
	// Batch is the team's policy for its batch jobs' priorities.
	Batch TeamBatch
}

// TeamBatch is a team's batch-priority policy as its page shows it.
type TeamBatch struct {
	// Priorities are the priorities its members may use, highest first.
	Priorities []string
	// HighGPUs caps the GPUs its high-priority jobs may ask for at
	// once; 0: no cap.
	HighGPUs int
}

// Allows reports whether the team allows priority p.
func (b TeamBatch) Allows(p string) bool { return slices.Contains(b.Priorities, p) }

// TeamSessions is a team's session policy as its page shows it.
type TeamSessions struct {
	// MaxHours is the longest a session runs, in hours; "0": no maximum.
	MaxHours string
	// PriorityGPUs is how many GPUs its sessions may hold with
	// interactive priority; 0: none.
	PriorityGPUs int
	// Off: its members may not start sessions. MaxGPUs caps the GPUs its
	// sessions may ask for at once; 0: no cap.
	Off     bool
	MaxGPUs int
}

// TeamIdle is a team's idle-GPU policy as its page shows it, with the
// server's rule for "idle" and its grace.
type TeamIdle struct {
	ReclaimSessions, ReclaimBatch bool
	MaxKeepAliveHours             string
	// BelowPct and After are the team's own idle threshold and time
	// ("12.5", "45m"); "" where it has none: the server's,
	// DefaultBelowPct and DefaultAfter ("none" where the server flags
	// nothing), apply.
	BelowPct, After               string
	DefaultBelowPct, DefaultAfter string
	// InForce is the rule in force, briefly: "under 5% for 30m", with
	// "(the server's)" where the team set none of it.
	InForce string
	// Rule says, in a sentence, when a job counts idle and how long it
	// is warned before being stopped (server settings).
	Rule string
}

// TeamFlags are what a team's lead should act on: jobs holding GPUs idle,
// and queued jobs a cap keeps from ever starting.
type TeamFlags struct {
	Team     string
	Idle     []IdleRow
	Stranded []StrandedRow
}

// StrandedRow is a queued job that a cap keeps from starting, and why.
type StrandedRow struct {
	ID         int64
	Name, User string
	Why        string
}

// TeamQueueRow is one of a team's unfinished jobs.
type TeamQueueRow struct {
	ID                          int64
	Name, User, State, Priority string
	GPUs, Queue                 int
	Attained                    string
}

// PriorityClass is the class a queue row shows of a job whose API
// priority is p (api.QueueJob.Priority): its batch priority, or
// "session" for a session, which has none.
func PriorityClass(p string) string {
	if p == "" {
		return "session"
	}
	return p
}

// MemberRow is one member of a team.
type MemberRow struct {
	User, Role, Usage string
	MaxGPUs           int
	// Fair share inside the team, for the lead and admins: the member's
	// decayed GPU-seconds, equal split of the guarantee (GPUs), share of
	// the team's decayed usage and factor, formatted.
	Decayed, Split, UsageShare, Factor string
}

// CapOption is the member as the cap form offers them: their name and
// their cap now ("alice · cap 2", "lead · no cap").
func (m MemberRow) CapOption() string {
	if m.MaxGPUs > 0 {
		return m.User + " · cap " + strconv.Itoa(m.MaxGPUs)
	}
	return m.User + " · no cap"
}

// Notifications is a user's notification settings page.
type Notifications struct {
	Email, WebhookURL string
	SecretSet         bool
	Events            []EventChoice
	HeldAfterHours    string
	EmailEnabled      bool // the server sends email
	Deliveries        []DeliveryRow
}

// EventChoice is one event's checkbox.
type EventChoice struct {
	Name, Label string
	Chosen      bool
}

// DeliveryRow is one notification and where its delivery stands.
type DeliveryRow struct {
	JobID                         int64
	Event, Channel, State, Detail string
	// Label names the state for people: "retrying" for a pending one
	// that failed before.
	Label                 string
	Attempts              int
	LastError             string
	At, NextAttempt, Sent string
}

// Accounting is the accounting page: the filters asked, the rows, and
// their sums per period and over the range.
type Accounting struct {
	From, To, By, Period string
	Team, User           string
	Scope                string
	IdleBelowPct         string
	// States names the outcome columns, in order; a row's Jobs match.
	States  []string
	Rows    []AccountingRow
	Periods []AccountingRow
	Total   AccountingRow
	CSVURL  string
	APIURL  string
	// What the viewer may pick: grouping by team (not researchers), a
	// team (admins), a user (leads and admins).
	CanByTeam, CanPickTeam, CanPickUser bool
}

// AccountingRow is one row of the accounting page, GPU-hours formatted.
type AccountingRow struct {
	Period, Team, User                            string
	Allocated, Used, UsedPct, Idle, IdleAllocated string
	Unsampled                                     string
	// Reclaimed is the idle GPU-hours idle reclaim gave back.
	Reclaimed                    string
	Jobs                         []int
	Preempted, Requeued, Started int
	WaitMedian, WaitP95          string
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

// AdminMachines is the admin's page of machines and join tokens.
type AdminMachines struct {
	Machines []MachineRow
	Tokens   []JoinTokenRow
	// NewToken is a join token just made, shown this once, with its name
	// and the server's address for the agent's command line.
	NewToken, NewTokenName, ServerURL string
}

// MachineRow is one machine: connected to the server now, registered by
// an agent that joined, or both.
type MachineRow struct {
	Name string
	// State: ready, draining, drained, cordoned (connected) or
	// disconnected (registered only).
	State     string
	LastHeard string
	GPUs      string // "4 × Simulated GPU 80 GB"
	Unhealthy string // "1 unhealthy"; "" when all are well
	Jobs      int
	// Joined says how it came: built in, with the server's agent token,
	// or with a join token (named).
	Joined string
	// Registered: an agent registered it, and an admin may forget it.
	Registered bool
}

// JoinTokenRow is one join token: named and dated.
type JoinTokenRow struct {
	ID                              int64
	Name, State, Created, CreatedBy string
	Expires                         string
	Machines                        int
	Active                          bool
}

// JoinTokenTTL is a choice of how long a new join token lasts: Value is
// the form's (seconds; 0: until revoked).
type JoinTokenTTL struct {
	Value, Label string
	Default      bool
}

// JoinTokenTTLs are the lives a new join token may have; a day by default,
// as the API's.
func JoinTokenTTLs() []JoinTokenTTL {
	return []JoinTokenTTL{
		{Value: "3600", Label: "1 hour"},
		{Value: "86400", Label: "1 day", Default: true},
		{Value: "604800", Label: "7 days"},
		{Value: "2592000", Label: "30 days"},
		{Value: "31536000", Label: "365 days"},
		{Value: "0", Label: "until revoked"},
	}
}

// Sessions is the user's sessions page: those that wait or run, and the
// last that ended.
type Sessions struct {
	Active, Ended []SessionCard
}

// SessionCard is one session as its card shows it.
type SessionCard struct {
	JobRow
	Type string // Jupyter, terminal, web app
	// URL opens it while it runs (the same address through requeues);
	// Note says how, or why it cannot be opened now.
	URL, Note string
	// TimeLeft until its time limit; Activity whether it is idle.
	TimeLeft, Activity string
	// Waiting: why it waits, and when it should start; "" unless it waits.
	Waiting string
	Ended   bool
}
