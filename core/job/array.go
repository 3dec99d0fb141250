package job

import (
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The bounds of an array (docs/portal.md, "Arrays"): a server limit,
// whatever the request. Slurm's default MaxArraySize (1001) allows
// indices 0 to 1000; here an index may be larger, as a label, but an
// array has at most MaxArrayTasks tasks.
const (
	// MaxArrayTasks bounds the tasks of one array, and %LIMIT: it counts
	// the indices as listed, an index listed twice counting twice.
	MaxArrayTasks = 1000
	// MaxArrayIndex is the largest index of a task.
	MaxArrayIndex = 999_999
	// MaxArraySpecLen bounds the text of an array: room for MaxArrayTasks
	// indices of six digits, listed one by one.
	MaxArraySpecLen = 8 << 10
)

// ArraySpec is an array as Slurm's --array writes it: the tasks' indices
// and how many may run at once.
type ArraySpec struct {
	Indices []int `json:"indices"`
	// Limit is how many tasks may run at once; 0: no limit.
	Limit int `json:"limit,omitempty"`
}

// ParseArray reads "0-5%2", "1,3,8-10" or "0-9:3%4": indices and ranges
// (with a step after ':'), then an optional %LIMIT. Every number is
// bounded before it is used (indices and steps by MaxArrayIndex, the
// tasks listed and the limit by MaxArrayTasks), so that no text, however
// large its numbers, makes it loop or allocate beyond those bounds.
func ParseArray(s string) (ArraySpec, error) {
	var a ArraySpec
	s = strings.TrimSpace(s)
	if len(s) > MaxArraySpecLen {
		return a, fmt.Errorf("is %d bytes long: at most %d", len(s), MaxArraySpecLen)
	}
	list, limit, hasLimit := strings.Cut(s, "%")
	if hasLimit {
		n, ok := arrayNumber(limit)
		if !ok || n < 1 || n > MaxArrayTasks {
			return a, fmt.Errorf("%q: the limit after %% must be a whole number from 1 to %d", s, MaxArrayTasks)
		}
		a.Limit = n
	}
	if list == "" {
		return a, fmt.Errorf("%q: want indices such as 0-5, 1,3,7 or 0-9:3, then optionally %%LIMIT", s)
	}
	seen := map[int]bool{}
	listed := 0
	for _, part := range strings.Split(list, ",") {
		rng, step, hasStep := strings.Cut(part, ":")
		lo, hi, isRange := strings.Cut(rng, "-")
		first, err := arrayIndex(s, lo)
		if err != nil {
			return a, err
		}
		last, by := first, 1
		if isRange {
			if last, err = arrayIndex(s, hi); err != nil {
				return a, err
			}
			if last < first {
				return a, fmt.Errorf("%q: range %q does not end at or after its start", s, rng)
			}
		}
		if hasStep {
			n, ok := arrayNumber(step)
			if !ok || n < 1 || n > MaxArrayIndex || !isRange {
				return a, fmt.Errorf("%q: a step (%q) must be a whole number from 1 to %d and follow a range", s, part, MaxArrayIndex)
			}
			by = n
		}
		// Every number is at most MaxArrayIndex: no sum here overflows.
		if listed += (last-first)/by + 1; listed > MaxArrayTasks {
			return a, fmt.Errorf("%q: more than %d tasks", s, MaxArrayTasks)
		}
		for i := first; i <= last; i += by {
			if !seen[i] {
				seen[i] = true
				a.Indices = append(a.Indices, i)
			}
		}
	}
	slices.Sort(a.Indices)
	return a, nil
}

// arrayIndex reads one index of array s: a whole number from 0 to
// MaxArrayIndex.
func arrayIndex(s, v string) (int, error) {
	n, ok := arrayNumber(v)
	if !ok || n > MaxArrayIndex {
		return 0, fmt.Errorf("%q: %q is not an index (a whole number from 0 to %d)", s, v, MaxArrayIndex)
	}
	return n, nil
}

// arrayNumber reads a number of an array's text: decimal digits only
// (no sign, no space), at most 9 of them, so that it never overflows.
func arrayNumber(v string) (int, bool) {
	if v == "" || len(v) > 9 || strings.TrimLeft(v, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// String writes a as ParseArray reads it.
func (a ArraySpec) String() string {
	var parts []string
	for i := 0; i < len(a.Indices); {
		j := i
		for j+1 < len(a.Indices) && a.Indices[j+1] == a.Indices[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", a.Indices[i], a.Indices[j]))
		} else {
			parts = append(parts, strconv.Itoa(a.Indices[i]))
		}
		i = j + 1
	}
	s := strings.Join(parts, ",")
	if a.Limit > 0 {
		s += "%" + strconv.Itoa(a.Limit)
	}
	return s
}

// MaxParamBytes bounds an array's parameter table.
const MaxParamBytes = 256 << 10

// ParseParams reads an array's parameter table: CSV with a header row
// whose columns name variables (CheckEnvName, at most MaxEnv), then one
// row per task (at most MaxArrayTasks), in the order of the tasks'
// indices, each row's values UTF-8 within MaxEnvBytes. It returns each
// task's variables, "NAME=VALUE".
func ParseParams(table string) ([][]string, error) {
	if len(table) > MaxParamBytes {
		return nil, fmt.Errorf("is %d bytes: at most %d", len(table), MaxParamBytes)
	}
	r := csv.NewReader(strings.NewReader(table))
	r.TrimLeadingSpace = true
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("is not CSV: %w", err)
	}
	if len(rows) < 2 {
		return nil, fmt.Errorf("needs a header row naming variables, then one row per task")
	}
	header := rows[0]
	if len(header) > MaxEnv {
		return nil, fmt.Errorf("has %d columns: at most %d variables", len(header), MaxEnv)
	}
	for i, name := range header {
		header[i] = strings.TrimSpace(name)
		if err := CheckEnvName(header[i]); err != nil {
			return nil, fmt.Errorf("column %d: %w", i+1, err)
		}
		if slices.Contains(header[:i], header[i]) {
			return nil, fmt.Errorf("column %s is given twice", header[i])
		}
	}
	if len(rows)-1 > MaxArrayTasks {
		return nil, fmt.Errorf("has %d rows: at most %d tasks", len(rows)-1, MaxArrayTasks)
	}
	out := make([][]string, 0, len(rows)-1)
	for r, row := range rows[1:] {
		env := make([]string, len(header))
		n := 0
		for i, name := range header {
			switch {
			case strings.ContainsRune(row[i], 0):
				return nil, fmt.Errorf("a value of %s contains a NUL byte", name)
			case !utf8.ValidString(row[i]):
				return nil, fmt.Errorf("row %d: the value of %s is not valid UTF-8", r+1, name)
			}
			env[i] = name + "=" + row[i]
			n += len(env[i])
		}
		if n > MaxEnvBytes {
			return nil, fmt.Errorf("row %d: its variables are %d bytes: at most %d", r+1, n, MaxEnvBytes)
		}
		out = append(out, env)
	}
	return out, nil
}
