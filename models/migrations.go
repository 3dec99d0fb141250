package models

import (
	"fmt"
	"time"

	"gorm.io/gorm"
)

// migrations is the schema's history, oldest first. Append new steps; never
// edit or renumber a released one. A step that adds a column to a table
// with rows gives it a default, so old rows read as the zero value.
func migrations() []migration {
	return []migration{
		{1, "baseline: the schema before versioned migrations", baseline},
		{2, "jobs: Salus sharing and memory estimate", jobsSharing},
		{3, "jobs: cancel requests from any replica", jobsCancelRequest},
		{4, "GPU and cluster history (history.go)", historyTables},
		{5, "cpu_profiles: measured Synergy sensitivity curves", cpuProfilesTable},
		{6, "jobs: declared Synergy sensitivity profile", jobsDeclaredProfile},
		{7, "node_holds and gpu_faults: cordons, drains and GPUs out of service (nodestate.go)", nodeStateTables},
		{8, "runs: every start of a job, numbered; jobs.run and job_events.run (runs.go)", runsTable},
		{9, "jobs: requeues without progress of a sharing job (held jobs)", jobsRequeueStalls},
		{10, "join_tokens and machines: agents' machine identity (machines.go)", machineTables},
		{11, "team_samples: GPUs in use and borrowed as fractions (shared GPUs)", teamSampleFractions},
		{12, "users.disabled_at, jobs.hold_reason and store_probes: account control and readiness (accounts.go, probe.go)", accountControl},
		{13, "forecasts: jobs' start forecasts, kept to measure them (forecasts.go)", forecastsTable},
		{14, "jobs: environment, working folder, time limit, retries, dependencies and arrays", jobsSpec},
		{15, "teams: default and maximum time limit of their jobs", teamsTimeLimits},
		{16, "notification_settings and notifications: users' notifications and their outbox (notifications.go)", notificationTables},
		{17, "users.unix_name, users.source and users.subject: Unix accounts and sign-in through LDAP or OpenID Connect (identity.go)", userIdentity},
		{18, "jobs: indexes for the paged, filtered jobs list (team, user, state with id) and sim_util_pct", jobsListIndexes},
		{21, "accounting_days and accounting_closed_days: GPU time used per day, team and user, kept after GPU history expires (accounting.go)", accountingTables},
		{22, "jobs.image: the container image a job's command runs in", jobsImage},
		{23, "jobs.session_type, session_port, session_secret and session_token: interactive sessions (jobsession.go)", jobsSession},
		{24, "user_usage: each user's decayed GPU usage within a team, for fair share inside a team (teams.go)", userUsageTable},
		{26, "jobs.keep_alive_until and teams.idle_spare_sessions, idle_reclaim_batch, max_keep_alive_s: reclaiming idle GPUs (reclaim.go)", idleReclaim},
		{27, "reclaimed runs, jobs.reentered_at and interactive_priority, teams.max_session_s and session_priority_gpus (reclaim, sessions)", reclaimedRuns},
		{29, "jobs: index on updated_at, for the engine's reads of the jobs changed since its last pass (engine.go)", jobsUpdatedIndex},
		{30, "teams.idle_below_pct and idle_after_s: each team's own rule for idle GPUs (0: the server's)", teamIdleRule},
		{31, "server_keys: the fingerprint of the key sessions' secrets are derived from (sessionkey.go)", serverKeysTable},
		{32, "jobs.idempotency_key and request_digest, unique per user: retried submissions get their first job (jobs.go)", jobsIdempotency},
		{33, "jobs.tasks_per_gpu: a process per GPU rather than per machine (docs/multinode.md)", jobsTasksPerGPU},
		{34, "api_tokens.last_used_at: when a token last authenticated a request (users.go)", apiTokensLastUsed},
		{35, "jobs.resume_*, lost_s: the checkpoint each run resumed from and the work faults cost (resume.go)", jobsResume},
		{37, "jobs.priority, teams.batch_priorities and high_priority_gpus: batch jobs at high, normal and low priority (docs/scheduling.md)", batchPriorities},
		{38, "jobs: index on finished_at, for the JCT window's reads (queueorder.go)", jobsFinishedIndex},
		{45, "reservations: the GPUs the scheduling leader's last pass reserved, kept across restarts and leaders (reservations.go)", reservationsTable},
		{46, "forecasts.started, kept by triggers on runs and forecasts, and its partial index by made_at (ForecastOutcomes)", forecastsStarted},
		{51, "job_counts and the triggers on jobs that keep it: the jobs by team and state without counting the table (jobcounts.go)", jobCountsTriggers},
		{52, "jobs: index of the jobs that have run, by team and submission, for the team's usage by member (MemberUsage)", jobsTeamUsageIndex},
		{60, "jobs.run_accrual_s, run_gpu_seconds, held_gpus: a shared GPU's share in a running job's attained service (usage.Accrual)", jobsHeldGPUs},
		{61, "jobs.stop_run, stop_to, stop_reason, stop_code, stop_at: the engine's request that a run stop, across restarts (job.StopRequest)", jobsStopRequest},
		{62, "jobs.resume_from_node: where a restored checkpoint copy was saved (job.Resume.FromNode)", jobsResumeFromNode},
		{63, "teams.sessions_off and max_session_gpus: whether a team allows sessions, and their GPUs at once", teamSessionLimits},
		{64, "jobs.alloc_cpus: the CPUs the current or last run was given, for sacct once it has ended", jobsAllocCPUs},
	}
}

// baseline is the schema as gorm's AutoMigrate made it before versioned
// migrations (commit c9668cf). On such a database it finds everything in
// place and changes nothing; on an empty one it creates it.
func baseline(tx *gorm.DB) error {
	return tx.Migrator().AutoMigrate(baselineModels()...)
}

func baselineModels() []any {
	return []any{&v1User{}, &v1Team{}, &v1Session{}, &v1APIToken{}, &v1Job{}, &v1AuditEntry{},
		&v1JobEvent{}, &v1JobTemplate{}, &v1UserCap{}, &v1TeamSample{}}
}

// The baseline's tables, frozen: copies of the structs of commit c9668cf.

type v1User struct {
	ID           int64  `gorm:"primaryKey"`
	Name         string `gorm:"uniqueIndex;size:64;not null"`
	PasswordHash string `gorm:"not null"`
	Role         string `gorm:"size:16;not null"`
	Team         string `gorm:"size:64"`
	CreatedAt    time.Time
}

func (v1User) TableName() string { return "users" }

type v1Team struct {
	ID              int64  `gorm:"primaryKey"`
	Name            string `gorm:"uniqueIndex;size:64;not null"`
	GuaranteeGPUs   int    `gorm:"not null;default:0"`
	Weight          float64
	MaxGPUsPerUser  int
	UsageGPUSeconds float64
	UsageAt         time.Time
	CreatedAt       time.Time
}

func (v1Team) TableName() string { return "teams" }

type v1UserCap struct {
	Team    string `gorm:"primaryKey;size:64"`
	User    string `gorm:"primaryKey;size:64"`
	MaxGPUs int    `gorm:"not null"`
}

func (v1UserCap) TableName() string { return "user_caps" }

type v1TeamSample struct {
	ID            int64     `gorm:"primaryKey"`
	Team          string    `gorm:"size:64;index:idx_team_sample,priority:1;not null"`
	At            time.Time `gorm:"index:idx_team_sample,priority:2;not null"`
	InUseGPUs     int
	BorrowedGPUs  int
	GuaranteeGPUs int
}

func (v1TeamSample) TableName() string { return "team_samples" }

type v1Session struct {
	TokenHash string `gorm:"primaryKey;size:64"`
	UserID    int64  `gorm:"index;not null"`
	CreatedAt time.Time
	ExpiresAt time.Time `gorm:"index"`
}

func (v1Session) TableName() string { return "sessions" }

type v1APIToken struct {
	ID        int64  `gorm:"primaryKey"`
	TokenHash string `gorm:"uniqueIndex;size:64;not null"`
	UserID    int64  `gorm:"index;not null"`
	Name      string `gorm:"size:128"`
	CreatedAt time.Time
	ExpiresAt time.Time
}

func (v1APIToken) TableName() string { return "api_tokens" }

type v1Job struct {
	ID          int64  `gorm:"primaryKey"`
	Name        string `gorm:"size:128;not null"`
	Team        string `gorm:"size:64;index;not null"`
	User        string `gorm:"size:64;index;not null"`
	GPUs        int    `gorm:"not null"`
	Command     string `gorm:"type:text"`
	SimDuration float64
	GPUMemMiB   int64
	Model       string `gorm:"size:64"`

	State       string `gorm:"size:16;index;not null"`
	Reason      string `gorm:"size:512"`
	SubmittedAt time.Time
	StartedAt   *time.Time
	FinishedAt  *time.Time
	ExitCode    *int

	Placement       string `gorm:"type:text"`
	LastStartAt     *time.Time
	ExecutedS       float64
	AttainedService float64
	Preemptions     int
	Failures        int
	RetryAt         *time.Time
	FirstEstimate   *time.Time
	UpdatedAt       time.Time

	QueueIndex    int
	QueueSince    float64
	CycleStart    float64
	CycleService  float64
	CycleExecuted float64
	Promotions    int
}

func (v1Job) TableName() string { return "jobs" }

type v1AuditEntry struct {
	ID     int64     `gorm:"primaryKey"`
	At     time.Time `gorm:"index;not null"`
	Actor  string    `gorm:"size:64;not null"`
	Action string    `gorm:"size:64;not null"`
	Target string    `gorm:"size:128"`
	Detail string    `gorm:"size:512"`
	From   string    `gorm:"size:64"`
}

func (v1AuditEntry) TableName() string { return "audit_entries" }

type v1JobEvent struct {
	ID     int64     `gorm:"primaryKey"`
	JobID  int64     `gorm:"index;not null"`
	At     time.Time `gorm:"not null"`
	State  string    `gorm:"size:16;not null"`
	Detail string    `gorm:"size:512"`
}

func (v1JobEvent) TableName() string { return "job_events" }

type v1JobTemplate struct {
	ID        int64  `gorm:"primaryKey"`
	User      string `gorm:"size:64;not null;uniqueIndex:idx_template_user_name"`
	Name      string `gorm:"size:128;not null;uniqueIndex:idx_template_user_name"`
	Body      string `gorm:"type:text;not null"`
	CreatedAt time.Time
}

func (v1JobTemplate) TableName() string { return "job_templates" }

// v2Job holds the columns step 2 adds to jobs: a job's Salus sharing
// request and its memory estimate (docs/salus.md).
type v2Job struct {
	Sharing          bool    `gorm:"default:false"`
	GPUFraction      float64 `gorm:"default:0"`
	MemPersistentMiB int64   `gorm:"default:0"`
	MemEphemeralMiB  int64   `gorm:"default:0"`
	MemSource        string  `gorm:"size:16;default:''"`
	BatchSize        int     `gorm:"default:0"`
	Parameters       int64   `gorm:"default:0"`
}

func (v2Job) TableName() string { return "jobs" }

func jobsSharing(tx *gorm.DB) error {
	return addColumns(tx, &v2Job{}, "Sharing", "GPUFraction", "MemPersistentMiB", "MemEphemeralMiB",
		"MemSource", "BatchSize", "Parameters")
}

// v3Job holds the column step 3 adds to jobs: a cancel that a replica
// which does not schedule asks of the one that does.
type v3Job struct {
	CancelRequest string `gorm:"size:512;default:''"`
}

func (v3Job) TableName() string { return "jobs" }

func jobsCancelRequest(tx *gorm.DB) error {
	return addColumns(tx, &v3Job{}, "CancelRequest")
}

// v5CPUProfile is the cpu_profiles table step 5 creates: the CPU and host
// memory sensitivity curves measured per model and batch (docs/synergy.md).
type v5CPUProfile struct {
	Model      string `gorm:"primaryKey;size:64"`
	Batch      int    `gorm:"primaryKey;autoIncrement:false"`
	Family     string `gorm:"size:32;not null"`
	CPUCurve   string `gorm:"size:2048;not null"`
	MemCurve   string `gorm:"size:2048;not null"`
	JobID      int64
	MeasuredAt time.Time
}

func (v5CPUProfile) TableName() string { return "cpu_profiles" }

func cpuProfilesTable(tx *gorm.DB) error {
	return createTables(tx, &v5CPUProfile{})
}

// v6Job holds the column step 6 adds to jobs: the CPU and host memory
// sensitivity profile the user declared (docs/synergy.md).
type v6Job struct {
	CPUProfile string `gorm:"type:text;default:''"`
}

func (v6Job) TableName() string { return "jobs" }

func jobsDeclaredProfile(tx *gorm.DB) error {
	return addColumns(tx, &v6Job{}, "CPUProfile")
}

// v8Job holds the column step 8 adds to jobs: the number of the job's
// current (or last) run, 0 before its first start.
type v8Job struct {
	Run int64 `gorm:"not null;default:0"`
}

func (v8Job) TableName() string { return "jobs" }

// v8JobEvent holds the column step 8 adds to job_events: the run an
// event belongs to, 0 for events outside a run.
type v8JobEvent struct {
	Run int64 `gorm:"not null;default:0"`
}

func (v8JobEvent) TableName() string { return "job_events" }

// v8Run is the runs table step 8 creates: one row per start of a job.
type v8Run struct {
	ID        int64     `gorm:"primaryKey"`
	JobID     int64     `gorm:"uniqueIndex:idx_runs_job_run,priority:1;not null"`
	Run       int64     `gorm:"uniqueIndex:idx_runs_job_run,priority:2;not null"`
	Placement string    `gorm:"type:text"`
	StartedAt time.Time `gorm:"not null"`
	EndedAt   *time.Time
	State     string `gorm:"size:16"`
	ExitCode  *int
	Reason    string `gorm:"size:512"`
}

func (v8Run) TableName() string { return "runs" }

func runsTable(tx *gorm.DB) error {
	if err := addColumns(tx, &v8Job{}, "Run"); err != nil {
		return err
	}
	if err := addColumns(tx, &v8JobEvent{}, "Run"); err != nil {
		return err
	}
	return createTables(tx, &v8Run{})
}

// v9Job holds the column step 9 adds to jobs: a sharing job's requeues in
// a row for outgrowing its lane that brought no larger estimate, which
// back it off and, past a bound, hold it (job.Requeue).
type v9Job struct {
	RequeueStalls int `gorm:"default:0"`
}

func (v9Job) TableName() string { return "jobs" }

func jobsRequeueStalls(tx *gorm.DB) error {
	return addColumns(tx, &v9Job{}, "RequeueStalls")
}

// v10JoinToken and v10Machine are the tables step 10 creates: join tokens
// and the machines agents registered with them (machines.go).
type v10JoinToken struct {
	ID        int64  `gorm:"primaryKey"`
	Name      string `gorm:"size:128;not null"`
	TokenHash string `gorm:"uniqueIndex;size:64;not null"`
	CreatedBy string `gorm:"size:64;not null"`
	CreatedAt time.Time
	ExpiresAt *time.Time
	RevokedAt *time.Time
	Uses      int `gorm:"not null;default:0"`
}

func (v10JoinToken) TableName() string { return "join_tokens" }

type v10Machine struct {
	ID             int64  `gorm:"primaryKey"`
	Name           string `gorm:"uniqueIndex;size:64;not null"`
	CredentialHash string `gorm:"size:64;not null"`
	JoinedWith     int64  `gorm:"not null;default:0"`
	CreatedAt      time.Time
	LastSeenAt     time.Time
}

func (v10Machine) TableName() string { return "machines" }

func machineTables(tx *gorm.DB) error {
	return createTables(tx, &v10JoinToken{}, &v10Machine{})
}

// v12User holds the columns step 12 adds to users: when and by whom an
// admin disabled the account.
type v12User struct {
	DisabledAt *time.Time
	DisabledBy string `gorm:"size:64;default:''"`
}

func (v12User) TableName() string { return "users" }

// v12Job holds the column step 12 adds to jobs: why the job is held
// while its owner's account is disabled or deleted.
type v12Job struct {
	HoldReason string `gorm:"size:512;default:''"`
}

func (v12Job) TableName() string { return "jobs" }

// v12StoreProbe is the table step 12 creates: the row readiness writes
// and deletes to learn whether the store can save (probe.go).
type v12StoreProbe struct {
	ID      int64     `gorm:"primaryKey"`
	At      time.Time `gorm:"not null"`
	Payload string    `gorm:"type:text;not null"`
}

func (v12StoreProbe) TableName() string { return "store_probes" }

func accountControl(tx *gorm.DB) error {
	if err := addColumns(tx, &v12User{}, "DisabledAt", "DisabledBy"); err != nil {
		return err
	}
	if err := addColumns(tx, &v12Job{}, "HoldReason"); err != nil {
		return err
	}
	return createTables(tx, &v12StoreProbe{})
}

// v14Job holds the columns step 14 adds to jobs: what a job runs with
// (its variables, folder, time limit and retries), the jobs it waits for,
// and the array it is a task of.
type v14Job struct {
	Env          string `gorm:"type:text"`
	Workdir      string `gorm:"size:1024;default:''"`
	TimeLimitS   int64  `gorm:"default:0"`
	Retries      int    `gorm:"default:0"`
	Dependencies string `gorm:"type:text"`
	ArrayID      int64  `gorm:"index;default:0"`
	ArrayIndex   int    `gorm:"default:0"`
	ArrayLimit   int    `gorm:"default:0"`
}

func (v14Job) TableName() string { return "jobs" }

func jobsSpec(tx *gorm.DB) error {
	if err := addColumns(tx, &v14Job{}, "Env", "Workdir", "TimeLimitS", "Retries", "Dependencies", "ArrayID", "ArrayIndex", "ArrayLimit"); err != nil {
		return err
	}
	if !tx.Migrator().HasIndex(&v14Job{}, "ArrayID") {
		if err := tx.Migrator().CreateIndex(&v14Job{}, "ArrayID"); err != nil {
			return fmt.Errorf("index jobs.array_id: %w", err)
		}
	}
	return nil
}

// v18Job holds the column step 18 adds to jobs: a simulated job's GPU
// utilization while it runs, NULL for a training job's usual one.
type v18Job struct {
	SimUtilPct *float64
}

func (v18Job) TableName() string { return "jobs" }

// jobsListIndexes adds the indexes the jobs list pages by: each filter
// column with the ID, so "team = ? AND id < ? ORDER BY id DESC LIMIT n"
// reads n index entries on PostgreSQL as on SQLite.
func jobsListIndexes(tx *gorm.DB) error {
	if err := addColumns(tx, &v18Job{}, "SimUtilPct"); err != nil {
		return err
	}
	for _, stmt := range []string{
		`CREATE INDEX IF NOT EXISTS idx_jobs_team_id ON jobs (team, id)`,
		`CREATE INDEX IF NOT EXISTS idx_jobs_user_id ON jobs ("user", id)`,
		`CREATE INDEX IF NOT EXISTS idx_jobs_state_id ON jobs (state, id)`,
	} {
		if err := tx.Exec(stmt).Error; err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// v15Team holds the columns step 15 adds to teams: the default and the
// longest time limit of their jobs.
type v15Team struct {
	DefaultTimeLimitS int64 `gorm:"default:0"`
	MaxTimeLimitS     int64 `gorm:"default:0"`
}

func (v15Team) TableName() string { return "teams" }

func teamsTimeLimits(tx *gorm.DB) error {
	return addColumns(tx, &v15Team{}, "DefaultTimeLimitS", "MaxTimeLimitS")
}

// v16NotificationSettings and v16Notification are the tables step 16
// creates: each user's notification choices, and the outbox of their
// notifications (notifications.go).
type v16NotificationSettings struct {
	UserID         int64   `gorm:"primaryKey;autoIncrement:false"`
	Email          string  `gorm:"size:254;not null;default:''"`
	WebhookURL     string  `gorm:"size:2048;not null;default:''"`
	WebhookSecret  string  `gorm:"size:256;not null;default:''"`
	Events         string  `gorm:"type:text"`
	HeldAfterHours float64 `gorm:"not null;default:0"`
	UpdatedAt      time.Time
}

func (v16NotificationSettings) TableName() string { return "notification_settings" }

type v16Notification struct {
	ID            int64     `gorm:"primaryKey"`
	UserID        int64     `gorm:"index;not null"`
	JobID         int64     `gorm:"not null;default:0"`
	EventID       int64     `gorm:"not null;default:0"`
	Event         string    `gorm:"size:16;not null"`
	Channel       string    `gorm:"size:16;not null"`
	Detail        string    `gorm:"size:512;not null;default:''"`
	At            time.Time `gorm:"not null"`
	DedupeKey     string    `gorm:"size:128;uniqueIndex;not null"`
	State         string    `gorm:"size:16;not null;index:idx_notifications_due,priority:1"`
	Attempts      int       `gorm:"not null;default:0"`
	LastError     string    `gorm:"size:512;not null;default:''"`
	NextAttemptAt time.Time `gorm:"not null;index:idx_notifications_due,priority:2"`
	SentAt        *time.Time
	CreatedAt     time.Time `gorm:"not null"`
}

func (v16Notification) TableName() string { return "notifications" }

func notificationTables(tx *gorm.DB) error {
	return createTables(tx, &v16NotificationSettings{}, &v16Notification{})
}

// v22Job holds the column step 22 adds to jobs: the container image the
// job's command runs in, empty for a command on the machine.
type v22Job struct {
	Image string `gorm:"size:512;default:''"`
}

func (v22Job) TableName() string { return "jobs" }

func jobsImage(tx *gorm.DB) error {
	return addColumns(tx, &v22Job{}, "Image")
}

// v23Job holds the columns step 23 adds to jobs: what an interactive
// session serves, its web app's port, its URL's secret and its own token.
type v23Job struct {
	SessionType   string `gorm:"size:16;default:''"`
	SessionPort   int    `gorm:"not null;default:0"`
	SessionSecret string `gorm:"size:64;default:''"`
	SessionToken  string `gorm:"size:64;default:''"`
}

func (v23Job) TableName() string { return "jobs" }

func jobsSession(tx *gorm.DB) error {
	return addColumns(tx, &v23Job{}, "SessionType", "SessionPort", "SessionSecret", "SessionToken")
}

// v26Job and v26Team hold the columns step 26 adds: until when a job's
// owner keeps it alive though idle, and each team's reclaim policy.
type v26Job struct {
	KeepAliveUntil *time.Time
}

func (v26Job) TableName() string { return "jobs" }

type v26Team struct {
	IdleSpareSessions bool  `gorm:"not null;default:false"`
	IdleReclaimBatch  bool  `gorm:"not null;default:false"`
	MaxKeepAliveS     int64 `gorm:"not null;default:0"`
}

func (v26Team) TableName() string { return "teams" }

func idleReclaim(tx *gorm.DB) error {
	if err := addColumns(tx, &v26Job{}, "KeepAliveUntil"); err != nil {
		return err
	}
	return addColumns(tx, &v26Team{}, "IdleSpareSessions", "IdleReclaimBatch", "MaxKeepAliveS")
}

// v24UserUsage is the table step 24 creates: a user's decayed usage
// within a team as of UsageAt, kept as teams.usage_gpu_seconds is.
type v24UserUsage struct {
	Team            string    `gorm:"primaryKey;size:64"`
	User            string    `gorm:"primaryKey;size:64"`
	UsageGPUSeconds float64   `gorm:"not null;default:0"`
	UsageAt         time.Time `gorm:"not null"`
}

func (v24UserUsage) TableName() string { return "user_usage" }

func userUsageTable(tx *gorm.DB) error {
	return createTables(tx, &v24UserUsage{})
}

// v27Run holds the columns step 27 adds to runs: when the portal
// reclaimed a run's idle GPUs and how many GPU-seconds that gave back.
type v27Run struct {
	ReclaimedAt         *time.Time
	ReclaimedGPUSeconds float64 `gorm:"not null;default:0"`
}

func (v27Run) TableName() string { return "runs" }

// v27Job, v27Run and v27Team hold the columns step 27 adds: when a job
// whose idle GPUs were reclaimed went to the back of its queue, whether
// a session asked for interactive priority, what a reclaimed run gave
// back, and each team's session policy.
type v27Job struct {
	ReenteredAt         *time.Time
	InteractivePriority bool `gorm:"not null;default:false"`
}

func (v27Job) TableName() string { return "jobs" }

type v27Team struct {
	MaxSessionS         int64 `gorm:"not null;default:0"`
	SessionPriorityGPUs int   `gorm:"not null;default:0"`
}

func (v27Team) TableName() string { return "teams" }

func reclaimedRuns(tx *gorm.DB) error {
	if err := addColumns(tx, &v27Job{}, "ReenteredAt", "InteractivePriority"); err != nil {
		return err
	}
	if err := addColumns(tx, &v27Team{}, "MaxSessionS", "SessionPriorityGPUs"); err != nil {
		return err
	}
	return addColumns(tx, &v27Run{}, "ReclaimedAt", "ReclaimedGPUSeconds")
}

// jobsUpdatedIndex indexes jobs by their last change, which the engine
// reads between its whole reads of the unfinished jobs
// (Store.JobsChangedSince).
func jobsUpdatedIndex(tx *gorm.DB) error {
	const stmt = `CREATE INDEX IF NOT EXISTS idx_jobs_updated_at ON jobs (updated_at)`
	if err := tx.Exec(stmt).Error; err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// v30Team holds the columns step 30 adds to teams: the team's own idle
// threshold and time (0: the server's).
type v30Team struct {
	IdleBelowPct float64 `gorm:"not null;default:0"`
	IdleAfterS   int64   `gorm:"not null;default:0"`
}

func (v30Team) TableName() string { return "teams" }

func teamIdleRule(tx *gorm.DB) error {
	return addColumns(tx, &v30Team{}, "IdleBelowPct", "IdleAfterS")
}

// v31ServerKey is the table step 31 adds: the fingerprints of the keys
// every server of the database must share.
type v31ServerKey struct {
	Name        string `gorm:"primaryKey;size:32"`
	Fingerprint string `gorm:"size:64;not null"`
}

func (v31ServerKey) TableName() string { return "server_keys" }

func serverKeysTable(tx *gorm.DB) error {
	return createTables(tx, &v31ServerKey{})
}

// v32Job holds the columns step 32 adds to jobs: the key a client
// submitted the job with and the digest of its request.
type v32Job struct {
	IdempotencyKey string `gorm:"size:255;default:''"`
	RequestDigest  string `gorm:"size:64;default:''"`
}

func (v32Job) TableName() string { return "jobs" }

func jobsIdempotency(tx *gorm.DB) error {
	if err := addColumns(tx, &v32Job{}, "IdempotencyKey", "RequestDigest"); err != nil {
		return err
	}
	const stmt = `CREATE UNIQUE INDEX IF NOT EXISTS idx_jobs_user_idempotency_key ON jobs ("user", idempotency_key) WHERE idempotency_key <> ''`
	if err := tx.Exec(stmt).Error; err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// v33Job holds the column step 33 adds to jobs: whether the command runs
// once per GPU rather than once per machine.
type v33Job struct {
	TasksPerGPU bool `gorm:"not null;default:false"`
}

func (v33Job) TableName() string { return "jobs" }

func jobsTasksPerGPU(tx *gorm.DB) error {
	return addColumns(tx, &v33Job{}, "TasksPerGPU")
}

// v34APIToken holds the column step 34 adds to api_tokens: when the token
// last authenticated a request (NULL: never).
type v34APIToken struct {
	LastUsedAt *time.Time
}

func (v34APIToken) TableName() string { return "api_tokens" }

func apiTokensLastUsed(tx *gorm.DB) error {
	return addColumns(tx, &v34APIToken{}, "LastUsedAt")
}

// v37Job and v37Team hold the columns step 37 adds: a batch job's
// priority, and which priorities a team allows, with its cap on
// high-priority GPUs.
type v37Job struct {
	Priority string `gorm:"size:8;not null;default:''"`
}

func (v37Job) TableName() string { return "jobs" }

type v37Team struct {
	BatchPriorities  string `gorm:"size:32;not null;default:''"`
	HighPriorityGPUs int    `gorm:"not null;default:0"`
}

func (v37Team) TableName() string { return "teams" }

func batchPriorities(tx *gorm.DB) error {
	if err := addColumns(tx, &v37Job{}, "Priority"); err != nil {
		return err
	}
	return addColumns(tx, &v37Team{}, "BatchPriorities", "HighPriorityGPUs")
}

// v35Job holds the columns step 35 adds to jobs: the checkpoint the last
// run resumed from, and the work faults cost.
type v35Job struct {
	ResumeRun          int64 `gorm:"not null;default:0"`
	ResumeFromRun      int64 `gorm:"not null;default:0"`
	ResumeCheckpointAt *time.Time
	ResumeLostS        float64 `gorm:"not null;default:0"`
	LostS              float64 `gorm:"not null;default:0"`
}

func (v35Job) TableName() string { return "jobs" }

func jobsResume(tx *gorm.DB) error {
	return addColumns(tx, &v35Job{}, "ResumeRun", "ResumeFromRun", "ResumeCheckpointAt", "ResumeLostS", "LostS")
}

// jobsFinishedIndex lets the JCT figures read the jobs that ended in their
// window by the index, not every finished job (issue 33).
func jobsFinishedIndex(tx *gorm.DB) error {
	const stmt = `CREATE INDEX IF NOT EXISTS idx_jobs_finished_at ON jobs (finished_at)`
	if err := tx.Exec(stmt).Error; err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// jobsTeamUsageIndex indexes the jobs that have run by team and
// submission, with the member and the service: a team's usage by member
// over its window (Store.MemberUsage) reads these entries alone, not the
// team's waiting jobs (issue 33).
func jobsTeamUsageIndex(tx *gorm.DB) error {
	const stmt = `CREATE INDEX IF NOT EXISTS idx_jobs_team_usage ON jobs (team, submitted_at, "user", attained_service) WHERE attained_service > 0`
	if err := tx.Exec(stmt).Error; err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// v60Job holds the columns of the attained service of a run in progress
// whose share of a shared GPU changes (usage.Accrual, issue 36).
type v60Job struct {
	RunAccrualS   float64 `gorm:"column:run_accrual_s;not null;default:0"`
	RunGPUSeconds float64 `gorm:"column:run_gpu_seconds;not null;default:0"`
	HeldGPUs      float64 `gorm:"column:held_gpus;not null;default:0"`
}

func (v60Job) TableName() string { return "jobs" }

func jobsHeldGPUs(tx *gorm.DB) error {
	return addColumns(tx, &v60Job{}, "RunAccrualS", "RunGPUSeconds", "HeldGPUs")
}

// v61Job holds the engine's request that a run stop (job.StopRequest).
type v61Job struct {
	StopRun    int64  `gorm:"not null;default:0"`
	StopTo     string `gorm:"size:16;not null;default:''"`
	StopReason string `gorm:"size:512;not null;default:''"`
	StopCode   *int
	StopAt     *time.Time
}

func (v61Job) TableName() string { return "jobs" }

func jobsStopRequest(tx *gorm.DB) error {
	return addColumns(tx, &v61Job{}, "StopRun", "StopTo", "StopReason", "StopCode", "StopAt")
}

// v62Job holds the machine a restored checkpoint copy was saved on.
type v62Job struct {
	ResumeFromNode string `gorm:"size:64;not null;default:''"`
}

func (v62Job) TableName() string { return "jobs" }

func jobsResumeFromNode(tx *gorm.DB) error {
	return addColumns(tx, &v62Job{}, "ResumeFromNode")
}

// v63Team holds a team's session limits: sessions off, and the GPUs its
// sessions may ask for at once.
type v63Team struct {
	SessionsOff    bool `gorm:"not null;default:false"`
	MaxSessionGPUs int  `gorm:"not null;default:0"`
}

func (v63Team) TableName() string { return "teams" }

func teamSessionLimits(tx *gorm.DB) error {
	return addColumns(tx, &v63Team{}, "SessionsOff", "MaxSessionGPUs")
}

// v64Job holds the CPUs a job's current or last run was given.
type v64Job struct {
	AllocCPUs int64 `gorm:"column:alloc_cpus;not null;default:0"`
}

func (v64Job) TableName() string { return "jobs" }

func jobsAllocCPUs(tx *gorm.DB) error {
	return addColumns(tx, &v64Job{}, "AllocCPUs")
}
