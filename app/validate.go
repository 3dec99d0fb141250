package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/synergy"
	"github.com/gpuportal/gpuportal/models"
)

// Checking a submission (docs/portal.md, "Jobs"): validate checks a
// request's form field by field; checkJobLimits what depends on the store
// (the team's time limits, the jobs depended on).

// Limits on what a job may ask for.
const (
	MaxJobName     = 128
	MaxGPUs        = 1024
	MaxSimDuration = 30 * 24 * 3600 // seconds
	MaxCommandLen  = 8192
	MaxGPUMemGB    = 1024
)

// SubmitErrors is what is wrong with r, submitted by u, field by field;
// empty when the job would be stored. clusterGPUs is the number of GPUs
// connected now (0 when none is, which does not limit the request).
func SubmitErrors(u *User, r api.SubmitRequest, teams []string, clusterGPUs int) FieldErrors {
	_, fe := validate(u, r, teams, clusterGPUs)
	return fe
}

// validate checks r for user u and returns the job to store, or what is
// wrong field by field (SubmitErrors).
func validate(u *User, r api.SubmitRequest, teams []string, clusterGPUs int) (*models.Job, FieldErrors) {
	fe := FieldErrors{}
	name := r.Name
	checkJobName(name, fe)
	team := submitTeam(u, r.Team, teams, fe)
	if r.GPUs == 0 && r.GPUFraction != 0 {
		r.GPUs = 1 // a fraction of a GPU is a job of one GPU
	}
	switch {
	case r.GPUs < 1:
		fe["gpus"] = "must be at least 1"
	case r.GPUs > MaxGPUs:
		fe["gpus"] = fmt.Sprintf("must be at most %d", MaxGPUs)
	case clusterGPUs > 0 && r.GPUs > clusterGPUs:
		fe["gpus"] = fmt.Sprintf("asks for %d GPUs but the cluster has %d", r.GPUs, clusterGPUs)
	}
	checkWhatRuns(r, fe)
	priority, ok := job.StoredPriority(r.Priority)
	switch {
	case !ok:
		fe["priority"] = fmt.Sprintf("unknown priority %q: want high, normal or low", r.Priority)
	case priority != "" && r.Session != nil:
		fe["priority"] = "is for batch jobs: a session asks for interactive priority with session.priority"
	}
	model := strings.ToLower(strings.TrimSpace(r.Model))
	if model != "" {
		if _, ok := sched.LookupModel(model); !ok && !memestModel(model) {
			fe["model"] = fmt.Sprintf("unknown model %q (known: %s)", r.Model, strings.Join(ModelNames(), ", "))
		}
	}
	switch m := r.GPUMemGB; {
	case math.IsNaN(m) || m < 0 || m > MaxGPUMemGB:
		fe["gpu_mem_gb"] = fmt.Sprintf("must be between 0 and %d", MaxGPUMemGB)
	case m > 0 && int64(m*1024) == 0:
		// Kept in MiB: less than one would be 0, no memory declared.
		fe["gpu_mem_gb"] = fmt.Sprintf("%v is less than 1 MiB: give 0 (none declared) or at least 0.001", m)
	}
	share := sharing(r, fe, model)
	profile := DeclaredProfile(r, fe)
	spec := spec(r, fe)
	if len(fe) > 0 {
		return nil, fe
	}
	j := &models.Job{
		Name: name, Team: team, User: u.Name, GPUs: r.GPUs,
		Command:     models.Strings(r.Command),
		Image:       r.Image,
		GPUMemMiB:   int64(r.GPUMemGB * 1024),
		Model:       model,
		TasksPerGPU: r.TasksPerGPU,
		Priority:    priority,
	}
	if r.Sim != nil {
		j.SimDuration, j.SimUtilPct = r.Sim.DurationS, r.Sim.UtilPct
	}
	if r.Session != nil {
		j.SessionType, j.SessionPort, j.InteractivePriority = r.Session.Type, r.Session.Port, r.Session.Priority
	}
	share.apply(j)
	spec.apply(j)
	if err := j.SetDeclaredProfile(profile); err != nil {
		return nil, FieldErrors{"cpu_profile": err.Error()}
	}
	return j, nil
}

// checkJobName checks a job's name.
func checkJobName(name string, fe FieldErrors) {
	switch {
	case strings.TrimSpace(name) == "":
		fe["name"] = "is required"
	case strings.TrimSpace(name) != name:
		fe["name"] = "begins or ends with white space: remove it"
	case len(name) > MaxJobName:
		fe["name"] = fmt.Sprintf("is longer than %d characters", MaxJobName)
	case !utf8.ValidString(name):
		fe["name"] = "is not valid UTF-8"
	case strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		fe["name"] = "contains control characters"
	}
}

// submitTeam is the team u submits to, asking for want ("": u's own),
// teams being every team; the team's field error says when u may not.
func submitTeam(u *User, want string, teams []string, fe FieldErrors) string {
	team := want
	if team == "" {
		team = u.Team
	}
	switch {
	case team == "":
		fe["team"] = "is required"
	case !slices.Contains(teams, team):
		fe["team"] = fmt.Sprintf("unknown team %q", team)
	case !submitsTo(u, team):
		fe["team"] = fmt.Sprintf("you may submit only to your team %q", u.Team)
	}
	return team
}

// submitsTo tells whether u may submit jobs to team: an admin to any,
// others to their own (ActorTeams lists them).
func submitsTo(u *User, team string) bool { return u.Role == RoleAdmin || team == u.Team }

// checkWhatRuns checks what a job runs: a session, a command (in an
// image, a process per GPU) or a simulated run.
func checkWhatRuns(r api.SubmitRequest, fe FieldErrors) {
	switch {
	case r.Session != nil:
		checkSession(r.Session, fe, r)
	case len(r.Command) > 0 && r.Sim != nil:
		fe["command"] = "give either command or sim, not both"
	case len(r.Command) == 0 && r.Sim == nil:
		fe["command"] = "is required (or sim for a simulated job)"
	case len(r.Command) > 0:
		if msg := checkArgv(r.Command); msg != "" {
			fe["command"] = msg
		}
	default:
		d := r.Sim.DurationS
		if math.IsNaN(d) || d < 1 || d > MaxSimDuration {
			fe["sim.duration_s"] = fmt.Sprintf("must be between 1 and %d seconds", MaxSimDuration)
		}
		if u := r.Sim.UtilPct; u != nil && (math.IsNaN(*u) || *u < 0 || *u > 100) {
			fe["sim.util_pct"] = "must be between 0 and 100"
		}
	}
	if r.Image != "" {
		switch {
		case len(r.Command) == 0:
			fe["image"] = "needs a command to run in it (a simulated job has no image)"
		default:
			if err := job.CheckImage(r.Image); err != nil {
				fe["image"] = err.Error()
			}
		}
	}
	if r.TasksPerGPU && (len(r.Command) == 0 || r.Image != "" || r.Session != nil) {
		fe["tasks_per_gpu"] = "is for a command run on the machines: not a simulated job, a container image or a session"
	}
}

// ModelNames lists the models a job may declare.
func ModelNames() []string {
	var names []string
	for _, m := range sched.Models() {
		names = append(names, m.Name)
	}
	for _, e := range memest.Entries() {
		if !slices.Contains(names, e.Model) {
			names = append(names, e.Model)
		}
	}
	return names
}

func checkArgv(argv []string) string {
	if argv[0] == "" {
		return "the program name is empty"
	}
	n := 0
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			return "contains a NUL byte"
		}
		if !utf8.ValidString(a) {
			return "is not valid UTF-8"
		}
		n += len(a)
	}
	if n > MaxCommandLen {
		return fmt.Sprintf("is longer than %d bytes", MaxCommandLen)
	}
	return ""
}

// Limits on what a job may ask for.
const (
	maxWorkdirLen = 1024
	maxJobRetries = 10
)

// jobSpec is what validate read of the request's environment, folder,
// time limit, retries and dependencies.
type jobSpec struct {
	env       []string
	workdir   string
	timeLimit time.Duration
	retries   int
	deps      []job.Dependency
	array     *job.ArraySpec
	params    [][]string
}

// spec checks the request's environment, folder, time, retries,
// dependencies and array, noting what is wrong in fe.
func spec(r api.SubmitRequest, fe FieldErrors) jobSpec {
	var sp jobSpec
	names := slices.Sorted(maps.Keys(r.Env))
	pairs := make([]string, 0, len(names))
	for _, n := range names {
		// A name is checked before it is joined to its value: "A=B": "c"
		// would otherwise pass as A set to "B=c".
		if err := job.CheckEnvName(n); err != nil {
			fe["env"] = err.Error()
			break
		}
		pairs = append(pairs, n+"="+r.Env[n])
	}
	var err error
	if _, bad := fe["env"]; !bad {
		if sp.env, err = job.ParseEnv(pairs); err != nil {
			fe["env"] = err.Error()
		}
	}
	switch w := r.Workdir; {
	case len(w) > maxWorkdirLen:
		fe["workdir"] = fmt.Sprintf("is longer than %d bytes", maxWorkdirLen)
	case strings.ContainsRune(w, 0) || !utf8.ValidString(w):
		fe["workdir"] = "contains a NUL byte or is not valid UTF-8"
	case w != "" && !filepath.IsAbs(w) && !filepath.IsLocal(w):
		fe["workdir"] = "must be an absolute folder, or one inside the job's folder (no ..)"
	default:
		sp.workdir = w
	}
	if sp.timeLimit, err = job.ParseTimeLimit(r.TimeLimit); err != nil {
		fe["time_limit"] = err.Error()
	}
	switch {
	case r.Retries < 0 || r.Retries > maxJobRetries:
		fe["retries"] = fmt.Sprintf("must be between 0 and %d", maxJobRetries)
	default:
		sp.retries = r.Retries
	}
	if len(r.Dependencies) > job.MaxDependencies {
		fe["dependencies"] = fmt.Sprintf("at most %d", job.MaxDependencies)
	}
	for _, d := range r.Dependencies {
		kind, err := job.ParseDepKind(string(d.Kind))
		if err != nil {
			fe["dependencies"] = err.Error()
			break
		}
		if d.JobID <= 0 {
			fe["dependencies"] = fmt.Sprintf("job_id %d: must be a job ID", d.JobID)
			break
		}
		sp.deps = append(sp.deps, job.Dependency{Kind: kind, JobID: d.JobID})
	}
	if r.ArrayParams != "" {
		if sp.params, err = job.ParseParams(r.ArrayParams); err != nil {
			fe["array_params"] = err.Error()
		}
	}
	switch {
	case r.Array != "":
		a, err := job.ParseArray(r.Array)
		if err != nil {
			fe["array"] = err.Error()
			break
		}
		sp.array = &a
		if sp.params != nil && len(sp.params) != len(a.Indices) {
			fe["array_params"] = fmt.Sprintf("has %d rows for %d tasks: give one row per task", len(sp.params), len(a.Indices))
		}
	case sp.params != nil:
		// The table alone makes the array: one task per row.
		a := job.ArraySpec{}
		for i := range sp.params {
			a.Indices = append(a.Indices, i)
		}
		sp.array = &a
	}
	return sp
}

// apply records sp in j, the job or the array's template task.
func (sp jobSpec) apply(j *models.Job) {
	j.Env, j.Workdir, j.TimeLimitS, j.Retries = models.Strings(sp.env), sp.workdir, int64(sp.timeLimit/time.Second), sp.retries
	for _, d := range sp.deps {
		j.Dependencies = append(j.Dependencies, d.String())
	}
	if sp.array != nil {
		j.ArrayLimit = sp.array.Limit
	}
}

// tasks are the jobs an array submission makes from its template t, in
// the order of their indices; nil when req is no array.
func (sp jobSpec) tasks(t *models.Job) []*models.Job {
	if sp.array == nil {
		return nil
	}
	out := make([]*models.Job, len(sp.array.Indices))
	for i, idx := range sp.array.Indices {
		j := *t
		j.Env = slices.Clone(t.Env)
		if sp.params != nil {
			// The task's row, after (so over) the job's own variables.
			j.Env = job.MergeEnv(j.Env, sp.params[i])
		}
		j.ArrayIndex = idx
		j.Name = fmt.Sprintf("%s[%d]", t.Name, idx)
		if len(j.Name) > MaxJobName {
			j.Name = fmt.Sprintf("%s…[%d]", t.Name[:MaxJobName-16], idx)
		}
		out[i] = &j
	}
	return out
}

// checkJobLimits checks j, as validate made it for u, against its team's
// time limits (a job without a limit gets the team's default) and the
// jobs it depends on, which u must be able to see.
func (s *App) checkJobLimits(ctx context.Context, u *User, j *models.Job, tasks int, fe FieldErrors) error {
	t, err := s.cfg.Store.Team(ctx, j.Team)
	if err != nil && !errors.Is(err, models.ErrNotFound) {
		return err
	}
	if t != nil {
		asked := j.TimeLimitS
		if j.TimeLimitS == 0 {
			j.TimeLimitS = t.DefaultTimeLimitS
		}
		if j.IsSession() && t.MaxSessionS > 0 {
			// A session runs at most the team's maximum: that is its
			// time limit unless it asked for less.
			switch {
			case asked > t.MaxSessionS:
				fe["time_limit"] = fmt.Sprintf("team %s's sessions run at most %s: ask for a time limit within it",
					t.Name, job.FormatTimeLimit(time.Duration(t.MaxSessionS)*time.Second))
			case j.TimeLimitS == 0 || j.TimeLimitS > t.MaxSessionS:
				j.TimeLimitS = t.MaxSessionS
			}
		}
		if err := s.checkPriority(ctx, t, j, tasks, fe); err != nil {
			return err
		}
		if t.MaxTimeLimitS > 0 && (j.TimeLimitS == 0 || j.TimeLimitS > t.MaxTimeLimitS) {
			fe["time_limit"] = fmt.Sprintf("team %s allows at most %s per job: ask for a time limit within it",
				t.Name, job.FormatTimeLimit(time.Duration(t.MaxTimeLimitS)*time.Second))
		}
	}
	for _, d := range j.Deps() {
		other, err := s.cfg.Store.Job(ctx, d.JobID)
		if errors.Is(err, models.ErrNotFound) || (err == nil && !CanSee(u, other.Team)) {
			fe["dependencies"] = fmt.Sprintf("no job %d that you can see", d.JobID)
			break
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkPriority refuses in fe a batch priority that team t does not
// allow its members, and a high-priority job (of tasks tasks) that would
// take t's high-priority jobs past t.HighPriorityGPUs.
func (s *App) checkPriority(ctx context.Context, t *models.Team, j *models.Job, tasks int, fe FieldErrors) error {
	if j.IsSession() {
		return s.checkSession(ctx, t, j, fe)
	}
	allowed := t.Priorities()
	if name := job.PriorityName(j.Priority); !slices.Contains(allowed, name) {
		fe["priority"] = fmt.Sprintf("team %s allows its jobs %s priority, not %s", t.Name, strings.Join(allowed, " or "), name)
		return nil
	}
	if j.Priority != job.PriorityHigh || t.HighPriorityGPUs <= 0 {
		return nil
	}
	held, err := s.cfg.Store.HighPriorityGPUs(ctx, t.Name)
	if err != nil {
		return err
	}
	if ask := j.GPUs * tasks; held+ask > t.HighPriorityGPUs {
		field, msg := overCap(&models.OverCapError{Cap: models.TeamCap{Team: t.Name}, GPUs: t.HighPriorityGPUs, Held: held, Ask: ask})
		fe[field] = msg
	}
	return nil
}

// overCap is the field a submission past a team's cap is refused on, and
// what to tell its user.
func overCap(e *models.OverCapError) (field, msg string) {
	c := e.Cap
	if c.Sessions {
		return "gpus", fmt.Sprintf("team %s's sessions may ask for %d GPUs at once; %d are asked for already, and this session asks for %d: end a session (gpuportal session stop ID), ask for fewer, or wait",
			c.Team, e.GPUs, e.Held, e.Ask)
	}
	return "priority", fmt.Sprintf("team %s's high-priority jobs may ask for %d GPUs at once; %d are asked for already, and this job asks for %d: submit it at normal priority, or wait",
		c.Team, e.GPUs, e.Held, e.Ask)
}

// sessionsOff is what a session of a team that allows none is refused
// with.
func sessionsOff(team string) string {
	return fmt.Sprintf("team %s does not allow interactive sessions (its session policy, set by its lead or an admin): submit a batch job instead", team)
}

// checkSession refuses in fe a session of team t where t's session
// policy allows none, and one that would take the GPUs t's sessions ask
// for past t.MaxSessionGPUs.
func (s *App) checkSession(ctx context.Context, t *models.Team, j *models.Job, fe FieldErrors) error {
	if t.SessionsOff {
		fe["session"] = sessionsOff(t.Name)
		return nil
	}
	if t.MaxSessionGPUs <= 0 {
		return nil
	}
	held, err := s.cfg.Store.SessionGPUs(ctx, t.Name)
	if err != nil {
		return err
	}
	if held+j.GPUs > t.MaxSessionGPUs {
		field, msg := overCap(&models.OverCapError{Cap: models.TeamCap{Team: t.Name, Sessions: true}, GPUs: t.MaxSessionGPUs, Held: held, Ask: j.GPUs})
		fe[field] = msg
	}
	return nil
}

// Limits on a sharing job's memory estimate.
const (
	maxBatchSize  = 1 << 20
	maxParameters = 10_000_000_000_000 // ten trillion
	// MinGPUFraction is the smallest share of a GPU a job may ask for:
	// the engine gives it that share of a GPU's memory.
	MinGPUFraction = 0.01
)

// shareRequest is what a valid request says about sharing.
type shareRequest struct {
	on       bool
	fraction float64
	est      memest.Estimate // zero when unknown
	batch    int
	params   int64
}

// memestModel reports whether memest's catalogue knows the model.
func memestModel(model string) bool {
	_, ok := memest.Lookup(model, 1)
	return ok
}

// sharing checks the sharing fields of r (docs/salus.md), noting what is
// wrong in fe. A job shares when it opts in (sharing) or asks for a
// fraction of a GPU (gpu_fraction, which implies sharing and one GPU).
// Only single-GPU jobs share. A sharing job needs a memory estimate:
// declared persistent and ephemeral memory (or a total, gpu_mem_gb), else
// a catalogue model with a batch size, else a parameter count with a
// batch size; a fraction of a GPU is an estimate by itself.
func sharing(r api.SubmitRequest, fe FieldErrors, model string) shareRequest {
	out := shareRequest{fraction: r.GPUFraction, batch: r.BatchSize, params: r.Parameters}
	maxMiB := int64(MaxGPUMemGB * 1024)
	f := r.GPUFraction
	switch {
	case math.IsNaN(f) || f < 0 || f >= 1 || (f > 0 && f < MinGPUFraction):
		fe["gpu_fraction"] = fmt.Sprintf("must be from %v to less than 1: the share of one GPU the job needs", MinGPUFraction)
	case f > 0 && r.GPUs != 1:
		fe["gpu_fraction"] = fmt.Sprintf("asks for a fraction of one GPU, but gpus is %d: leave gpus out or set it to 1", r.GPUs)
	}
	out.on = r.Sharing || f > 0
	if r.Sharing && r.GPUs != 1 {
		fe["sharing"] = fmt.Sprintf("needs exactly 1 GPU (gpus is %d): only single-GPU jobs share a GPU", r.GPUs)
	}
	for field, v := range map[string]int64{"mem_persistent_mib": r.MemPersistentMiB, "mem_ephemeral_mib": r.MemEphemeralMiB} {
		if v < 0 || v > maxMiB {
			fe[field] = fmt.Sprintf("must be between 0 and %d MiB", maxMiB)
		}
	}
	if r.BatchSize < 0 || r.BatchSize > maxBatchSize {
		fe["batch_size"] = fmt.Sprintf("must be between 0 and %d", maxBatchSize)
	}
	if r.Parameters < 0 || r.Parameters > maxParameters {
		fe["parameters"] = fmt.Sprintf("must be between 0 and %d", int64(maxParameters))
	}
	if !out.on {
		return out
	}
	if len(fe) > 0 {
		return out
	}
	est, err := memest.For(memest.Request{
		PersistentMiB: r.MemPersistentMiB, EphemeralMiB: r.MemEphemeralMiB,
		TotalMiB: int64(r.GPUMemGB * 1024), Model: model, Batch: r.BatchSize, Parameters: r.Parameters,
	})
	switch {
	case err == nil:
		out.est = est
		if padded := (memest.Padding{}).Apply(est); padded.TotalMiB() > maxMiB {
			fe["mem_ephemeral_mib"] = fmt.Sprintf("the estimate, P %d MiB and E %d MiB padded, exceeds %d MiB", est.PersistentMiB, est.EphemeralMiB, maxMiB)
		}
	case errors.Is(err, memest.ErrUnknown) && f > 0:
		// The fraction of the GPU it runs on is the estimate.
	case errors.Is(err, memest.ErrUnknown):
		fe["sharing"] = "needs a memory estimate: declare mem_persistent_mib and mem_ephemeral_mib (or gpu_mem_gb), " +
			"or a catalogue model with batch_size, or parameters with batch_size, or ask for a gpu_fraction"
	default:
		fe["sharing"] = "memory estimate: " + err.Error()
	}
	return out
}

// apply stores the sharing request on j.
func (sr shareRequest) apply(j *models.Job) {
	j.BatchSize, j.Parameters = sr.batch, sr.params
	if !sr.on {
		return
	}
	j.Sharing, j.GPUFraction = true, sr.fraction
	j.MemPersistentMiB, j.MemEphemeralMiB, j.MemSource = sr.est.PersistentMiB, sr.est.EphemeralMiB, string(sr.est.Source)
}

// Limits on a declared sensitivity profile.
const (
	maxCoresPerGPU  = 256  // x of a CPU curve
	maxMemGiBPerGPU = 4096 // x of a memory curve
)

// FamilyCustom is the family of a declared profile with curves of its own.
const FamilyCustom = "custom"

// CPUProfileRequest is a job's CPU and host memory sensitivity as its user
// declares it (docs/synergy.md): a family of the catalogue, or curves, or
// a family with a curve that replaces the family's for that resource.
// Curves are [x, speed] points: x in cores per GPU (cpu_curve) or GiB of
// host memory per GPU (mem_curve), rising; speed in (0, 1], relative to
// the job's best, never falling. A resource without a curve (and no
// family) does not matter to the job.
type CPUProfileRequest struct {
	Family   string      `json:"family,omitempty"`
	CPUCurve [][]float64 `json:"cpu_curve,omitempty"`
	MemCurve [][]float64 `json:"mem_curve,omitempty"`
}

// DeclaredProfile checks r.CPUProfile, noting what is wrong in fe under
// cpu_profile.*, and returns the profile to store; nil when none was
// declared or it is not valid.
func DeclaredProfile(r api.SubmitRequest, fe FieldErrors) *synergy.Profile {
	d := r.CPUProfile
	if d == nil {
		return nil
	}
	if d.Family == "" && len(d.CPUCurve) == 0 && len(d.MemCurve) == 0 {
		fe["cpu_profile"] = "give a family (" + strings.Join(synergy.Families(), ", ") + ") or cpu_curve / mem_curve"
		return nil
	}
	p := synergy.Profile{Family: FamilyCustom}
	if d.Family != "" {
		base, ok := synergy.CatalogueProfile(d.Family)
		if !ok {
			fe["cpu_profile.family"] = fmt.Sprintf("unknown family %q (known: %s)", d.Family, strings.Join(synergy.Families(), ", "))
			return nil
		}
		p = base
		p.CPU, p.Mem = slices.Clone(base.CPU), slices.Clone(base.Mem)
	}
	ok := true
	for _, c := range []struct {
		field string
		pts   [][]float64
		maxX  float64
		into  *synergy.Curve
	}{
		{"cpu_profile.cpu_curve", d.CPUCurve, maxCoresPerGPU, &p.CPU},
		{"cpu_profile.mem_curve", d.MemCurve, maxMemGiBPerGPU, &p.Mem},
	} {
		if len(c.pts) == 0 {
			continue
		}
		curve, msg := CheckCurve(c.pts, c.maxX)
		if msg != "" {
			fe[c.field], ok = msg, false
			continue
		}
		*c.into, p.Family = curve, FamilyCustom
	}
	if !ok {
		return nil
	}
	return &p
}

// CheckCurve reads declared [x, speed] points, or says what is wrong.
func CheckCurve(pts [][]float64, maxX float64) (synergy.Curve, string) {
	if len(pts) > api.MaxProfilePoints {
		return nil, fmt.Sprintf("has %d points, at most %d", len(pts), api.MaxProfilePoints)
	}
	out := make(synergy.Curve, 0, len(pts))
	for i, pt := range pts {
		n := i + 1
		if len(pt) != 2 {
			return nil, fmt.Sprintf("point %d: want [x, speed], got %d numbers", n, len(pt))
		}
		x, y := pt[0], pt[1]
		switch {
		case math.IsNaN(x) || x < 0 || x > maxX:
			return nil, fmt.Sprintf("point %d: x %v must be between 0 and %v per GPU", n, x, maxX)
		case math.IsNaN(y) || y <= 0 || y > 1:
			return nil, fmt.Sprintf("point %d: speed %v must be more than 0 and at most 1", n, y)
		case i > 0 && x <= out[i-1].X:
			return nil, fmt.Sprintf("point %d: x %v must be above the previous point's %v", n, x, out[i-1].X)
		case i > 0 && y < out[i-1].Speed:
			return nil, fmt.Sprintf("point %d: speed %v falls from %v (a curve never falls)", n, y, out[i-1].Speed)
		}
		out = append(out, synergy.Point{X: x, Speed: y})
	}
	return out, ""
}

// profileRequestOf is the declaration that would give j's declared
// profile again (for a template made from j); nil when none was. A
// family's profile is declared by the family, a custom one by its curves.
func profileRequestOf(j *models.Job) *api.CPUProfileRequest {
	p, err := j.DeclaredProfile()
	if err != nil {
		return nil
	}
	return ProfileRequest(p)
}

// ProfileRequest is the declaration that gives the profile p; nil for
// nil. A family's profile is declared by the family, a custom one by its
// curves.
func ProfileRequest(p *synergy.Profile) *api.CPUProfileRequest {
	if p == nil {
		return nil
	}
	if p.Family != FamilyCustom {
		return &api.CPUProfileRequest{Family: p.Family}
	}
	pts := func(c synergy.Curve) [][]float64 {
		var out [][]float64
		for _, pt := range c {
			out = append(out, []float64{pt.X, pt.Speed})
		}
		return out
	}
	return &api.CPUProfileRequest{CPUCurve: pts(p.CPU), MemCurve: pts(p.Mem)}
}

// checkSession validates the session part of r, field by field.
func checkSession(sr *api.SessionRequest, fe FieldErrors, r api.SubmitRequest) {
	t := job.SessionType(sr.Type)
	if !t.Valid() {
		fe["session.type"] = fmt.Sprintf("unknown session type %q: want jupyter, terminal or web", sr.Type)
		return
	}
	if r.Sim != nil {
		fe["sim"] = "a session runs a server, not a simulated job: leave sim out"
	}
	switch {
	case sr.Port != 0 && t != job.SessionWeb:
		fe["session.port"] = "is only for web sessions: Jupyter and terminals get a port from the agent"
	case sr.Port < 0 || sr.Port > 65535:
		fe["session.port"] = "must be between 1 and 65535, or 0 for one the agent picks ($PORT)"
	}
	switch {
	case t == job.SessionTerminal && len(r.Command) > 0:
		fe["command"] = "a terminal session runs a shell: leave command empty"
	case t == job.SessionWeb && len(r.Command) == 0:
		fe["command"] = "is required for a web session: the command that serves the app"
	case len(r.Command) > 0:
		if msg := checkArgv(r.Command); msg != "" {
			fe["command"] = msg
		}
	}
}

// RequestOf is the submission that would make j again.
func RequestOf(j *Job) api.SubmitRequest { return requestOf(&j.row) }

// requestOf is RequestOf for a row.
func requestOf(j *models.Job) api.SubmitRequest {
	r := api.SubmitRequest{Name: j.Name, Team: j.Team, GPUs: j.GPUs, Command: api.Command(j.Command), Image: j.Image,
		GPUMemGB: float64(j.GPUMemMiB) / 1024, Model: j.Model, CPUProfile: profileRequestOf(j),
		Sharing: j.Sharing, GPUFraction: j.GPUFraction, BatchSize: j.BatchSize, Parameters: j.Parameters,
		Workdir: j.Workdir, Retries: j.Retries, Dependencies: j.Deps(), TasksPerGPU: j.TasksPerGPU, Priority: j.Priority}
	if j.MemSource == "declared" {
		r.MemPersistentMiB, r.MemEphemeralMiB = j.MemPersistentMiB, j.MemEphemeralMiB
	}
	switch {
	case j.IsSession():
		r.Session = &api.SessionRequest{Type: j.SessionType, Port: j.SessionPort, Priority: j.InteractivePriority}
	case len(j.Command) == 0:
		r.Sim = &api.SimSpec{DurationS: j.SimDuration}
	}
	if len(j.Env) > 0 {
		r.Env = make(map[string]string, len(j.Env))
		for _, kv := range j.Env {
			k, v, _ := strings.Cut(kv, "=")
			r.Env[k] = v
		}
	}
	if j.TimeLimitS > 0 {
		r.TimeLimit = job.FormatTimeLimit(j.TimeLimit())
	}
	return r
}
