package job

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A job's time limit bounds the time it runs, counted over all its runs
// (its executed time: preemptions, requeues and retries included), not
// per run as Slurm counts it: here the scheduler itself preempts jobs,
// and a limit per run would never bound a job preempted often. At the
// limit its run is stopped (SIGTERM, the grace period, SIGKILL) and the
// job ends TimedOut; a job whose time is used up never starts again.

// MaxTimeLimit is the longest time limit a job may ask for.
const MaxTimeLimit = 365 * 24 * time.Hour

// ParseTimeLimit reads a time limit as Slurm's --time writes it
// (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) or as a Go
// duration (90m, 2h, 1h30m), in whole seconds. "" and "0" are no limit
// (0).
func ParseTimeLimit(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	d, err := parseTimeLimit(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want a duration such as 2h, 90m, 1-00:00:00 (D-HH:MM:SS), 30:00 (MM:SS) or a number of minutes", s)
	}
	switch {
	case d <= 0 || d > MaxTimeLimit:
		return 0, fmt.Errorf("%q: must be positive and at most %s", s, FormatTimeLimit(MaxTimeLimit))
	case d%time.Second != 0:
		// Limits are kept in whole seconds: 1ns would become 0, no limit.
		return 0, fmt.Errorf("%q: must be whole seconds", s)
	}
	return d, nil
}

func parseTimeLimit(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	num := func(x string) (int64, error) {
		if x == "" || strings.TrimLeft(x, "0123456789") != "" {
			return 0, fmt.Errorf("not a number: %q", x)
		}
		return strconv.ParseInt(x, 10, 64)
	}
	var days int64
	rest := s
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, err := num(d)
		if err != nil {
			return 0, err
		}
		days, rest = n, r
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return 0, fmt.Errorf("too many fields")
	}
	vals := make([]int64, len(parts))
	for i, p := range parts {
		n, err := num(p)
		if err != nil {
			return 0, err
		}
		vals[i] = n
	}
	var h, m, sec int64
	if rest != s { // D-HH, D-HH:MM, D-HH:MM:SS
		h = vals[0]
		if len(vals) > 1 {
			m = vals[1]
		}
		if len(vals) > 2 {
			sec = vals[2]
		}
	} else { // M, MM:SS, HH:MM:SS
		switch len(vals) {
		case 1:
			m = vals[0]
		case 2:
			m, sec = vals[0], vals[1]
		case 3:
			h, m, sec = vals[0], vals[1], vals[2]
		}
	}
	if days > 400 || h > 400*24 || m > 400*24*60 || sec > 400*24*3600 {
		return 0, fmt.Errorf("too large")
	}
	return time.Duration(((days*24+h)*60+m)*60+sec) * time.Second, nil
}

// FormatTimeLimit writes d as Slurm does: D-HH:MM:SS, or HH:MM:SS under
// a day; "none" for 0.
func FormatTimeLimit(d time.Duration) string {
	if d <= 0 {
		return "none"
	}
	s := int64(d.Round(time.Second) / time.Second)
	days, s := s/86400, s%86400
	hms := fmt.Sprintf("%02d:%02d:%02d", s/3600, s%3600/60, s%60)
	if days > 0 {
		return fmt.Sprintf("%d-%s", days, hms)
	}
	return hms
}

// TimeLeft is what remains of limit for a job that has run executed; 0
// or less: its time is used up. A job without a limit (0) always has
// time left.
func TimeLeft(limit, executed time.Duration) time.Duration {
	if limit <= 0 {
		return MaxTimeLimit
	}
	return limit - executed
}
