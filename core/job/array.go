package job

import (
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxArrayTasks bounds the tasks of one array.
const MaxArrayTasks = 1000

// ArraySpec is an array as Slurm's --array writes it: the tasks' indices
// and how many may run at once.
type ArraySpec struct {
	Indices []int `json:"indices"`
	// Limit is how many tasks may run at once; 0: no limit.
	Limit int `json:"limit,omitempty"`
}

// ParseArray reads "0-5%2", "1,3,8-10" or "0-9:3%4": indices and ranges
// (with a step after ':'), then an optional %LIMIT.
func ParseArray(s string) (ArraySpec, error) {
	var a ArraySpec
	list, limit, hasLimit := strings.Cut(strings.TrimSpace(s), "%")
	if hasLimit {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 {
			return a, fmt.Errorf("%q: the limit after %% must be a positive number", s)
		}
		a.Limit = n
	}
	if list == "" {
		return a, fmt.Errorf("%q: want indices such as 0-5, 1,3,7 or 0-9:3, then optionally %%LIMIT", s)
	}
	seen := map[int]bool{}
	for _, part := range strings.Split(list, ",") {
		rng, step, hasStep := strings.Cut(part, ":")
		lo, hi, isRange := strings.Cut(rng, "-")
		first, err := strconv.Atoi(lo)
		if err != nil || first < 0 {
			return a, fmt.Errorf("%q: %q is not an index (0 or more)", s, lo)
		}
		last, by := first, 1
		if isRange {
			if last, err = strconv.Atoi(hi); err != nil || last < first {
				return a, fmt.Errorf("%q: range %q does not end at or after its start", s, rng)
			}
		}
		if hasStep {
			if by, err = strconv.Atoi(step); err != nil || by < 1 || !isRange {
				return a, fmt.Errorf("%q: a step (%q) must be positive and follow a range", s, part)
			}
		}
		if (last-first)/by+1+len(a.Indices) > MaxArrayTasks {
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
// whose columns name variables (CheckEnvName), then one row per task, in
// the order of the tasks' indices. It returns each task's variables,
// "NAME=VALUE".
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
	for _, row := range rows[1:] {
		env := make([]string, len(header))
		for i, name := range header {
			if strings.ContainsRune(row[i], 0) {
				return nil, fmt.Errorf("a value of %s contains a NUL byte", name)
			}
			env[i] = name + "=" + row[i]
		}
		out = append(out, env)
	}
	return out, nil
}
