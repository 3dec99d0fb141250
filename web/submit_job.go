package web

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// What a job runs with besides its command: its own variables, its
// working folder, its time limit, its retries, the jobs it waits for and
// the array it makes (docs/portal.md, "Jobs"). validate checks their
// form; checkJobLimits what depends on the store (the team's time limits,
// the jobs depended on).

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
func (r SubmitRequest) spec(fe fieldErrors) jobSpec {
	var sp jobSpec
	names := slices.Sorted(maps.Keys(r.Env))
	pairs := make([]string, 0, len(names))
	for _, n := range names {
		pairs = append(pairs, n+"="+r.Env[n])
	}
	env, err := job.ParseEnv(pairs)
	if err != nil {
		fe["env"] = err.Error()
	}
	sp.env = env
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
			j.Env = mergeEnv(j.Env, sp.params[i])
		}
		j.ArrayIndex = idx
		j.Name = fmt.Sprintf("%s[%d]", t.Name, idx)
		if len(j.Name) > maxJobName {
			j.Name = fmt.Sprintf("%s…[%d]", t.Name[:maxJobName-16], idx)
		}
		out[i] = &j
	}
	return out
}

// mergeEnv is env with over's variables set, replacing any of the same
// name.
func mergeEnv(env, over []string) []string {
	out := slices.DeleteFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.ContainsFunc(over, func(o string) bool { return strings.HasPrefix(o, name+"=") })
	})
	return append(out, over...)
}

// checkJobLimits checks j, as validate made it for u, against its team's
// time limits (a job without a limit gets the team's default) and the
// jobs it depends on, which u must be able to see.
func (s *Server) checkJobLimits(ctx context.Context, u *models.User, j *models.Job, fe fieldErrors) error {
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
		if t.MaxTimeLimitS > 0 && (j.TimeLimitS == 0 || j.TimeLimitS > t.MaxTimeLimitS) {
			fe["time_limit"] = fmt.Sprintf("team %s allows at most %s per job: ask for a time limit within it",
				t.Name, job.FormatTimeLimit(time.Duration(t.MaxTimeLimitS)*time.Second))
		}
	}
	for _, d := range j.Deps() {
		other, err := s.cfg.Store.Job(ctx, d.JobID)
		if errors.Is(err, models.ErrNotFound) || (err == nil && !canSee(u, other.Team)) {
			fe["dependencies"] = fmt.Sprintf("no job %d that you can see", d.JobID)
			break
		}
		if err != nil {
			return err
		}
	}
	return nil
}
