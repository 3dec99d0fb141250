package job

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// A job's own environment: variables its owner sets at submission, added
// by its machine to the minimal environment every job gets.

// MaxEnv and MaxEnvBytes bound a job's own environment.
const (
	MaxEnv      = 128
	MaxEnvBytes = 32 << 10
)

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ReservedEnvPrefix starts the variables gpuportal sets for each job.
const ReservedEnvPrefix = "GPUPORTAL_"

// CheckEnvName checks the name of a job's variable: letters, digits and
// _, not starting with a digit, and none that gpuportal sets for each job
// (GPUPORTAL_*, CUDA_VISIBLE_DEVICES).
func CheckEnvName(name string) error {
	switch {
	case !envNameRe.MatchString(name):
		return fmt.Errorf("%q is not a variable name (letters, digits and _, not starting with a digit)", name)
	case strings.HasPrefix(name, ReservedEnvPrefix) || name == "CUDA_VISIBLE_DEVICES":
		return fmt.Errorf("%s is set by gpuportal for each job and cannot be set", name)
	}
	return nil
}

// ParseEnv reads "NAME=VALUE" pairs, each name checked by CheckEnvName and
// given once, values UTF-8 without NUL bytes, within MaxEnv and
// MaxEnvBytes. It returns them in the order given.
func ParseEnv(pairs []string) ([]string, error) {
	if len(pairs) > MaxEnv {
		return nil, fmt.Errorf("%d variables: at most %d", len(pairs), MaxEnv)
	}
	seen := make(map[string]bool, len(pairs))
	n := 0
	for _, kv := range pairs {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want NAME=VALUE", kv)
		}
		if err := CheckEnvName(name); err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("%s is given twice", name)
		}
		seen[name] = true
		switch {
		case strings.ContainsRune(value, 0):
			return nil, fmt.Errorf("the value of %s contains a NUL byte", name)
		case !utf8.ValidString(value):
			// Stored as JSON, it would come back with U+FFFD in place of
			// its bytes: another value than the one given.
			return nil, fmt.Errorf("the value of %s is not valid UTF-8", name)
		}
		n += len(kv)
	}
	if n > MaxEnvBytes {
		return nil, fmt.Errorf("%d bytes: at most %d", n, MaxEnvBytes)
	}
	return pairs, nil
}

// ArrayTask is one task of an array (a sweep): one submission of several
// jobs that differ by their index, and by their row of the parameter
// table when it had one.
type ArrayTask struct {
	// ID is the array's: the ID of its first task.
	ID    int64
	Index int
}

// Env is the task's variables: GPUPORTAL_ARRAY_JOB_ID and
// GPUPORTAL_ARRAY_INDEX.
func (a *ArrayTask) Env() []string {
	if a == nil {
		return nil
	}
	return []string{fmt.Sprintf("GPUPORTAL_ARRAY_JOB_ID=%d", a.ID), fmt.Sprintf("GPUPORTAL_ARRAY_INDEX=%d", a.Index)}
}

// MergeEnv is env (NAME=value each) with over's variables set, replacing
// every one of the same name: execve keeps both of a name given twice,
// and most programs read the first. env is not changed.
func MergeEnv(env, over []string) []string {
	out := make([]string, 0, len(env)+len(over))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(over, func(o string) bool { return strings.HasPrefix(o, name+"=") }) {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}
