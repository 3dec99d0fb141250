package job

import (
	"fmt"
	"strconv"
	"strings"
)

// A job may wait for others (like Slurm's --dependency): it starts only
// once each job it depends on has ended the way it asks, and is cancelled
// when one ended otherwise.

// DepKind is how a job depends on another.
type DepKind string

// The kinds of dependency.
const (
	AfterOK     DepKind = "after_ok"     // the other succeeded
	AfterAny    DepKind = "after_any"    // the other ended, however
	AfterFailed DepKind = "after_failed" // the other ended without succeeding
)

// Dependency is a job's wait for another job.
type Dependency struct {
	Kind  DepKind `json:"kind"`
	JobID int64   `json:"job_id"`
	// Array says that JobID is an array's (its first task's ID), whose
	// state is its tasks' together: set where the states are read, for
	// the reasons' words; never stored or sent.
	Array bool `json:"-"`
}

// MaxDependencies bounds the dependencies of one job.
const MaxDependencies = 64

// String writes d as Slurm does: "afterok:41".
func (d Dependency) String() string {
	return strings.ReplaceAll(string(d.Kind), "_", "") + ":" + strconv.FormatInt(d.JobID, 10)
}

// ParseDepKind reads a kind as the API (after_ok) or Slurm (afterok)
// writes it.
func ParseDepKind(s string) (DepKind, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "after_ok", "afterok":
		return AfterOK, nil
	case "after_any", "afterany":
		return AfterAny, nil
	case "after_failed", "afternotok", "after_failed_or_cancelled", "afterfailed":
		return AfterFailed, nil
	}
	return "", fmt.Errorf("unknown dependency %q (want after_ok, after_any or after_failed; afterok, afterany, afternotok)", s)
}

// ParseDependencies reads Slurm's --dependency list:
// "afterok:41:42,afterany:43" (a kind, then one or more job IDs), at
// most MaxDependencies of them.
func ParseDependencies(s string) ([]Dependency, error) {
	var out []Dependency
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		fields := strings.Split(strings.TrimSpace(part), ":")
		if len(fields) < 2 {
			return nil, fmt.Errorf("%q: want KIND:JOB[:JOB...], as in afterok:41", part)
		}
		kind, err := ParseDepKind(fields[0])
		if err != nil {
			return nil, err
		}
		for _, f := range fields[1:] {
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil || id <= 0 {
				return nil, fmt.Errorf("%q: %q is not a job ID", part, f)
			}
			if len(out) == MaxDependencies {
				return nil, fmt.Errorf("more than %d dependencies", MaxDependencies)
			}
			out = append(out, Dependency{Kind: kind, JobID: id})
		}
	}
	return out, nil
}

// Check says what the other job's state, other, means for the dependent:
// wait (with why, as "waiting for job 41 to succeed"), go on (both ""),
// or never (cancel: why the dependent is cancelled).
func (d Dependency) Check(other State) (wait, cancel string) {
	// An array is named as one ("array 41", its tasks' state together),
	// not as its first task, job 41, whose own state may differ.
	what, its := fmt.Sprintf("job %d", d.JobID), "it"
	if d.Array {
		what, its = fmt.Sprintf("array %d", d.JobID), "every task of it"
	}
	if !other.Final() {
		switch {
		case d.Kind == AfterOK:
			return fmt.Sprintf("waiting for %s to succeed", what), ""
		case d.Kind == AfterFailed && d.Array:
			return fmt.Sprintf("waiting for %s to end with a task that did not succeed", what), ""
		case d.Kind == AfterFailed:
			return fmt.Sprintf("waiting for %s to fail", what), ""
		default:
			return fmt.Sprintf("waiting for %s to end", what), ""
		}
	}
	switch {
	case d.Kind == AfterOK && other != Succeeded && d.Array:
		return "", fmt.Sprintf("dependency never satisfied: a task of %s ended %s, and this job runs only after %s succeeds", what, other, its)
	case d.Kind == AfterOK && other != Succeeded:
		return "", fmt.Sprintf("dependency never satisfied: %s ended %s, and this job runs only after it succeeds", what, other)
	case d.Kind == AfterFailed && other == Succeeded:
		return "", fmt.Sprintf("dependency never satisfied: %s succeeded, and this job runs only after it fails", what)
	}
	return "", ""
}
