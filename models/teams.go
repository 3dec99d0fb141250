package models

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/core/job"
)

// Team returns the team called name.
func (s *Store) Team(ctx context.Context, name string) (*Team, error) {
	var t Team
	if err := s.db.WithContext(ctx).Where("name = ?", name).First(&t).Error; err != nil {
		return nil, notFound(err, "team "+name)
	}
	return &t, nil
}

// SetTeamShare changes a team's guarantee, weight and per-user cap.
func (s *Store) SetTeamShare(ctx context.Context, name string, guaranteeGPUs int, weight float64, maxGPUsPerUser int) error {
	if guaranteeGPUs < 0 || maxGPUsPerUser < 0 || !(weight > 0) || math.IsInf(weight, 0) {
		return fmt.Errorf("set share of team %s: guarantee and cap must be 0 or more, weight positive", name)
	}
	res := s.db.WithContext(ctx).Model(&Team{}).Where("name = ?", name).Updates(map[string]any{
		"GuaranteeGPUs": guaranteeGPUs, "Weight": weight, "MaxGPUsPerUser": maxGPUsPerUser,
	})
	if res.Error != nil {
		return fmt.Errorf("set share of team %s: %w", name, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("team %s: %w", name, ErrNotFound)
	}
	return nil
}

// SetTeamTimeLimits sets the time limit of the team's jobs submitted
// without one (defaultS) and the longest one may ask for (maxS), in
// seconds; 0: none. A default above the maximum is refused.
func (s *Store) SetTeamTimeLimits(ctx context.Context, name string, defaultS, maxS int64) error {
	if defaultS < 0 || maxS < 0 || (maxS > 0 && defaultS > maxS) {
		return fmt.Errorf("set time limits of team %s: default %ds and maximum %ds must be 0 or more, the default within the maximum", name, defaultS, maxS)
	}
	res := s.db.WithContext(ctx).Model(&Team{}).Where("name = ?", name).Updates(map[string]any{
		"DefaultTimeLimitS": defaultS, "MaxTimeLimitS": maxS,
	})
	if res.Error != nil {
		return fmt.Errorf("set time limits of team %s: %w", name, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("team %s: %w", name, ErrNotFound)
	}
	return nil
}

// IdlePolicy is a team's idle-GPU reclaim policy (see Team).
type IdlePolicy struct {
	SpareSessions bool
	ReclaimBatch  bool
	MaxKeepAliveS int64
	// BelowPct and AfterS are the team's own idle rule; 0: the server's.
	BelowPct float64
	AfterS   int64
}

// SetTeamIdlePolicy sets team name's idle-GPU reclaim policy.
func (s *Store) SetTeamIdlePolicy(ctx context.Context, name string, p IdlePolicy) error {
	if p.MaxKeepAliveS < 0 {
		return fmt.Errorf("set idle policy of team %s: maximum keep-alive %ds must be 0 or more", name, p.MaxKeepAliveS)
	}
	if p.BelowPct != 0 {
		if err := idle.CheckBelow(p.BelowPct); err != nil {
			return fmt.Errorf("set idle policy of team %s: idle threshold %w", name, err)
		}
	}
	if err := idle.CheckAfter(time.Duration(p.AfterS) * time.Second); err != nil {
		return fmt.Errorf("set idle policy of team %s: idle time %w", name, err)
	}
	res := s.db.WithContext(ctx).Model(&Team{}).Where("name = ?", name).Updates(map[string]any{
		"IdleSpareSessions": p.SpareSessions, "IdleReclaimBatch": p.ReclaimBatch, "MaxKeepAliveS": p.MaxKeepAliveS,
		"IdleBelowPct": p.BelowPct, "IdleAfterS": p.AfterS,
	})
	if res.Error != nil {
		return fmt.Errorf("set idle policy of team %s: %w", name, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("team %s: %w", name, ErrNotFound)
	}
	return nil
}

// SessionPolicy is a team's session policy (see Team).
type SessionPolicy struct {
	MaxSessionS         int64
	SessionPriorityGPUs int
	SessionsOff         bool
	MaxSessionGPUs      int
}

// SetTeamSessionPolicy sets team name's session policy.
func (s *Store) SetTeamSessionPolicy(ctx context.Context, name string, p SessionPolicy) error {
	if p.MaxSessionS < 0 || p.SessionPriorityGPUs < 0 || p.MaxSessionGPUs < 0 {
		return fmt.Errorf("set session policy of team %s: maximum %ds, priority GPUs %d and session GPUs %d must be 0 or more",
			name, p.MaxSessionS, p.SessionPriorityGPUs, p.MaxSessionGPUs)
	}
	res := s.db.WithContext(ctx).Model(&Team{}).Where("name = ?", name).Updates(map[string]any{
		"MaxSessionS": p.MaxSessionS, "SessionPriorityGPUs": p.SessionPriorityGPUs,
		"SessionsOff": p.SessionsOff, "MaxSessionGPUs": p.MaxSessionGPUs,
	})
	if res.Error != nil {
		return fmt.Errorf("set session policy of team %s: %w", name, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("team %s: %w", name, ErrNotFound)
	}
	return nil
}

// DefaultBatchPriorities are the priorities a team allows when it names
// none: normal and low, not high.
var DefaultBatchPriorities = []string{job.PriorityNormal, job.PriorityLow}

// Priorities lists the batch priorities t's members may use
// (BatchPriorities, or DefaultBatchPriorities).
func (t *Team) Priorities() []string {
	if t.BatchPriorities == "" {
		return slices.Clone(DefaultBatchPriorities)
	}
	return strings.Split(t.BatchPriorities, ",")
}

// BatchPolicy is a team's policy for its batch jobs' priorities (see
// Team): Priorities in the order high, normal, low, none twice.
type BatchPolicy struct {
	Priorities       []string
	HighPriorityGPUs int
}

// SetTeamBatchPolicy sets team name's batch policy.
func (s *Store) SetTeamBatchPolicy(ctx context.Context, name string, p BatchPolicy) error {
	if p.HighPriorityGPUs < 0 || len(p.Priorities) == 0 {
		return fmt.Errorf("set batch policy of team %s: priorities %v and high-priority GPUs %d: want at least one priority and 0 GPUs or more", name, p.Priorities, p.HighPriorityGPUs)
	}
	for _, pr := range p.Priorities {
		if _, ok := job.StoredPriority(pr); !ok || pr == "" {
			return fmt.Errorf("set batch policy of team %s: unknown priority %q", name, pr)
		}
	}
	list := strings.Join(p.Priorities, ",")
	if slices.Equal(p.Priorities, DefaultBatchPriorities) {
		list = ""
	}
	res := s.db.WithContext(ctx).Model(&Team{}).Where("name = ?", name).Updates(map[string]any{
		"BatchPriorities": list, "HighPriorityGPUs": p.HighPriorityGPUs,
	})
	if res.Error != nil {
		return fmt.Errorf("set batch policy of team %s: %w", name, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("team %s: %w", name, ErrNotFound)
	}
	return nil
}

// HighPriorityGPUs is what team's unfinished high-priority jobs ask for,
// waiting or running: the figure Team.HighPriorityGPUs caps.
func (s *Store) HighPriorityGPUs(ctx context.Context, team string) (int, error) {
	return unfinishedGPUs(s.db.WithContext(ctx), TeamCap{Team: team})
}

// SessionGPUs is what team's unfinished sessions ask for, waiting or
// running: the figure Team.MaxSessionGPUs caps. A session asked to end
// (cancelled, at its time limit) no longer counts while it stops, so that
// its owner may start another at once.
func (s *Store) SessionGPUs(ctx context.Context, team string) (int, error) {
	return unfinishedGPUs(s.db.WithContext(ctx), TeamCap{Team: team, Sessions: true})
}

// TeamCap names the cap a submission counts against: its team's
// sessions (Team.SessionsOff, Team.MaxSessionGPUs) or its high-priority
// jobs (Team.HighPriorityGPUs). The caps themselves are read in the
// transaction that stores the submission (Store.CreateJobWithin), so
// that a lead's change between validation and storing holds.
type TeamCap struct {
	Team     string
	Sessions bool // its sessions; else its high-priority jobs
}

func (c TeamCap) kind() string {
	if c.Sessions {
		return "session"
	}
	return "high-priority"
}

// ErrSessionsOff refuses a session of a team whose session policy
// allows none (Team.SessionsOff).
var ErrSessionsOff = errors.New("its session policy allows no sessions")

// OverCapError refuses a submission that would take what a team's jobs
// of a kind ask for past the team's cap on them, GPUs: Held are asked
// for already, Ask by the submission.
type OverCapError struct {
	Cap             TeamCap
	GPUs, Held, Ask int
}

func (e *OverCapError) Error() string {
	return fmt.Sprintf("team %s's %s jobs may ask for %d GPUs at once; %d are asked for already, and %d more were", e.Cap.Team, e.Cap.kind(), e.GPUs, e.Held, e.Ask)
}

// unfinishedGPUs is what c's team's unfinished jobs of c's kind ask for,
// waiting or running (q: the database or a transaction): the figure c
// caps. A session asked to end (cancelled, at its time limit) does not
// count while it stops, so that its owner may start another at once;
// one asked to stop to wait again (preempted, reclaimed) does.
func unfinishedGPUs(q *gorm.DB, c TeamCap) (int, error) {
	var n int64
	q = q.Model(&Job{}).Select("COALESCE(SUM(gp_us), 0)").Where("team = ? AND state IN ?", c.Team, UnfinishedStates)
	if c.Sessions {
		q = q.Where("session_type <> '' AND COALESCE(cancel_request, '') = '' AND NOT (stop_run <> 0 AND stop_to IN ?)",
			[]JobState{JobSucceeded, JobFailed, JobCancelled, JobTimedOut})
	} else {
		q = q.Where("priority = ?", job.PriorityHigh)
	}
	if err := q.Scan(&n).Error; err != nil {
		return 0, fmt.Errorf("%s GPUs of team %s: %w", c.kind(), c.Team, err)
	}
	return int(n), nil
}

// CreateJobWithin stores a new queued job as CreateJob does, unless its
// GPUs would take its team's jobs of c's kind past the team's cap on
// them (an *OverCapError), or it is a session of a team that allows none
// (ErrSessionsOff).
func (s *Store) CreateJobWithin(ctx context.Context, j *Job, c TeamCap) error {
	j.State, j.Reason = JobQueued, "submitted"
	return s.within(ctx, c, j.GPUs, 1, func(tx *gorm.DB) error { return createJob(tx, j) })
}

// CreateArrayWithin stores an array's tasks as CreateArray does, unless
// their GPUs would take their team's jobs of c's kind past the team's
// cap on them (an *OverCapError).
func (s *Store) CreateArrayWithin(ctx context.Context, tasks []*Job, c TeamCap) error {
	if len(tasks) == 0 {
		return fmt.Errorf("create array: no tasks")
	}
	ask := 0
	for _, t := range tasks {
		ask += t.GPUs
	}
	return s.within(ctx, c, ask, len(tasks), func(tx *gorm.DB) error { return createArray(tx, tasks) })
}

// within runs create, which stores n jobs asking for ask GPUs, in the
// transaction that reads c's team's caps and counts what they cap, so
// that no other submission counts between and no policy changes between:
// on PostgreSQL the team's row is locked as it is read, which orders two
// replicas' submissions for the team and a lead's change of its policy
// (SQLite has one writer, and the portal one process over it).
func (s *Store) within(ctx context.Context, c TeamCap, ask, n int, create func(tx *gorm.DB) error) error {
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		q := tx
		if tx.Dialector.Name() == "postgres" {
			q = tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
		}
		var t Team
		if err := q.Where("name = ?", c.Team).Take(&t).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return fmt.Errorf("team %s: %w", c.Team, ErrNotFound)
			}
			return fmt.Errorf("read team %s: %w", c.Team, err)
		}
		limit := t.HighPriorityGPUs
		if c.Sessions {
			if t.SessionsOff {
				return fmt.Errorf("a session of team %s: %w", c.Team, ErrSessionsOff)
			}
			limit = t.MaxSessionGPUs
		}
		if limit > 0 {
			held, err := unfinishedGPUs(tx, c)
			if err != nil {
				return err
			}
			if held+ask > limit {
				return &OverCapError{Cap: c, GPUs: limit, Held: held, Ask: ask}
			}
		}
		return create(tx)
	})
	if err == nil {
		s.writes.add("job", n)
	}
	return err
}

// SetTeamUsage records each team's decayed usage as of at.
func (s *Store) SetTeamUsage(ctx context.Context, usage map[string]float64, at time.Time) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for team, u := range usage {
			err := tx.Model(&Team{}).Where("name = ?", team).
				Updates(map[string]any{"UsageGPUSeconds": u, "UsageAt": at}).Error
			if err != nil {
				return fmt.Errorf("set usage of team %s: %w", team, err)
			}
		}
		return nil
	})
}

// TeamUser names a user within a team.
type TeamUser struct {
	Team string
	User string
}

// SetUserUsage records each user's decayed usage within a team as of at.
func (s *Store) SetUserUsage(ctx context.Context, usage map[TeamUser]float64, at time.Time) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for k, u := range usage {
			row := UserUsage{Team: k.Team, User: k.User, UsageGPUSeconds: u, UsageAt: at}
			err := tx.Clauses(clause.OnConflict{
				Columns:   []clause.Column{{Name: "team"}, {Name: "user"}},
				DoUpdates: clause.AssignmentColumns([]string{"usage_gpu_seconds", "usage_at"}),
			}).Create(&row).Error
			if err != nil {
				return fmt.Errorf("set usage of user %s in team %s: %w", k.User, k.Team, err)
			}
		}
		return nil
	})
}

// UserUsages returns every user's saved decayed usage within each team.
func (s *Store) UserUsages(ctx context.Context) ([]UserUsage, error) {
	var out []UserUsage
	if err := s.db.WithContext(ctx).Order("team, \"user\"").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read user usage: %w", err)
	}
	return out, nil
}

// UserCaps returns the per-user caps of every team: team -> user -> GPUs.
func (s *Store) UserCaps(ctx context.Context) (map[string]map[string]int, error) {
	var cs []UserCap
	if err := s.db.WithContext(ctx).Find(&cs).Error; err != nil {
		return nil, fmt.Errorf("list user caps: %w", err)
	}
	out := make(map[string]map[string]int)
	for _, c := range cs {
		if out[c.Team] == nil {
			out[c.Team] = make(map[string]int)
		}
		out[c.Team][c.User] = c.MaxGPUs
	}
	return out, nil
}

// SetUserCap caps user's GPUs in team; 0 removes the cap.
func (s *Store) SetUserCap(ctx context.Context, team, user string, maxGPUs int) error {
	if maxGPUs < 0 {
		return fmt.Errorf("cap of %s in %s: must be 0 or more", user, team)
	}
	db := s.db.WithContext(ctx)
	if maxGPUs == 0 {
		if err := db.Where("team = ? AND \"user\" = ?", team, user).Delete(&UserCap{}).Error; err != nil {
			return fmt.Errorf("remove cap of %s in %s: %w", user, team, err)
		}
		return nil
	}
	c := UserCap{Team: team, User: user, MaxGPUs: maxGPUs}
	err := db.Clauses(clause.OnConflict{UpdateAll: true}).Create(&c).Error
	if err != nil {
		return fmt.Errorf("cap of %s in %s: %w", user, team, err)
	}
	return nil
}

// AddTeamSamples records where teams stand now.
func (s *Store) AddTeamSamples(ctx context.Context, samples []TeamSample) error {
	if len(samples) == 0 {
		return nil
	}
	if err := s.db.WithContext(ctx).Create(&samples).Error; err != nil {
		return fmt.Errorf("record team samples: %w", err)
	}
	return nil
}

// TeamSamples returns a team's samples since a time, oldest first.
func (s *Store) TeamSamples(ctx context.Context, team string, since time.Time) ([]TeamSample, error) {
	var out []TeamSample
	err := s.db.WithContext(ctx).Where("team = ? AND at >= ?", team, since).Order("at").Limit(20000).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("samples of team %s: %w", team, err)
	}
	return out, nil
}

// MemberUsage returns the attained service (GPU-seconds) of each user's
// jobs in team that were submitted since a time; a user none of whose
// jobs has run is left out (0). The jobs waiting to run for the first
// time, however many, add nothing and are not summed (issue 33).
func (s *Store) MemberUsage(ctx context.Context, team string, since time.Time) (map[string]float64, error) {
	var rows []struct {
		Member string
		Total  float64
	}
	err := s.db.WithContext(ctx).Model(&Job{}).Select("jobs.user AS member, sum(jobs.attained_service) AS total").
		Where("team = ? AND submitted_at >= ? AND attained_service > 0", team, since).Group("jobs.user").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("usage of team %s: %w", team, err)
	}
	out := make(map[string]float64, len(rows))
	for _, r := range rows {
		out[r.Member] = r.Total
	}
	return out, nil
}
