package trace

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// Team is one team of a simulated cluster: what it is guaranteed and its
// weight among borrowers (see docs/fair-share.md). Jobs name their team
// in Job.Team.
type Team struct {
	Name string
	// GuaranteeGPUs is the team's guaranteed share of GPUs.
	GuaranteeGPUs int
	// Weight is the team's share among borrowers; 0 means 1.
	Weight float64
	// MaxGPUsPerUser caps what one user of the team may hold; 0 is no cap.
	MaxGPUsPerUser int
}

// maxGuarantee bounds a team's guarantee, to refuse typos.
const maxGuarantee = 1 << 24

// ParseTeams parses a list of teams such as "vision:16:1,nlp:8:2": for
// each, NAME:GUARANTEED_GPUS[:WEIGHT[:MAX_GPUS_PER_USER]], comma-separated.
// The weight defaults to 1 and the cap to none.
func ParseTeams(spec string) ([]Team, error) {
	var out []Team
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		f := strings.Split(item, ":")
		if len(f) < 2 || len(f) > 4 {
			return nil, fmt.Errorf("team %q: want NAME:GUARANTEED_GPUS[:WEIGHT[:MAX_GPUS_PER_USER]]", item)
		}
		t := Team{Name: strings.TrimSpace(f[0]), Weight: 1}
		if t.Name == "" {
			return nil, fmt.Errorf("team %q: the name is empty", item)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("team %q appears twice", t.Name)
		}
		seen[t.Name] = true
		g, err := strconv.Atoi(strings.TrimSpace(f[1]))
		if err != nil || g < 0 || g > maxGuarantee {
			return nil, fmt.Errorf("team %s: guarantee %q: want 0 to %d GPUs", t.Name, f[1], maxGuarantee)
		}
		t.GuaranteeGPUs = g
		if len(f) > 2 {
			w, err := strconv.ParseFloat(strings.TrimSpace(f[2]), 64)
			if err != nil || !(w > 0) || math.IsInf(w, 1) {
				return nil, fmt.Errorf("team %s: weight %q: want a positive number", t.Name, f[2])
			}
			t.Weight = w
		}
		if len(f) > 3 {
			c, err := strconv.Atoi(strings.TrimSpace(f[3]))
			if err != nil || c < 0 || c > maxGuarantee {
				return nil, fmt.Errorf("team %s: cap per user %q: want 0 (none) to %d GPUs", t.Name, f[3], maxGuarantee)
			}
			t.MaxGPUsPerUser = c
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, errors.New("no teams")
	}
	return out, nil
}

// teamColumns are the columns of a team file; team and guaranteed_gpus
// are required.
var teamColumns = []string{"team", "guaranteed_gpus", "weight", "max_gpus_per_user"}

// ReadTeams parses a team file: a CSV with the columns team,
// guaranteed_gpus and optionally weight (default 1) and max_gpus_per_user
// (default 0, no cap).
func ReadTeams(r io.Reader, name string) ([]Team, error) {
	t, err := openTable(r, name)
	if err != nil {
		return nil, err
	}
	if err := t.require("team", "guaranteed_gpus"); err != nil {
		return nil, err
	}
	if err := t.only(teamColumns); err != nil {
		return nil, err
	}
	var out []Team
	seen := map[string]int{}
	err = t.each(func(row row) error {
		name := row.str("team")
		if name == "" {
			return row.errorf("team", "empty team name")
		}
		if first, dup := seen[name]; dup {
			return row.errorf("team", "team %q already named on line %d", name, first)
		}
		seen[name] = row.line
		tm, err := teamOf(row)
		if err != nil {
			return err
		}
		out = append(out, tm)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, &ParseError{File: name, Err: errors.New("no teams")}
	}
	return out, nil
}

// teamOf reads the share of one row of a team file.
func teamOf(row row) (Team, error) {
	tm := Team{Name: row.str("team"), Weight: 1}
	g, err := row.intIn("guaranteed_gpus", 0, maxGuarantee)
	if err != nil {
		return tm, err
	}
	tm.GuaranteeGPUs = int(g)
	if row.str("weight") != "" {
		if tm.Weight, err = row.float("weight"); err != nil {
			return tm, err
		}
		if !(tm.Weight > 0) {
			return tm, row.errorf("weight", "%v: want a positive number", tm.Weight)
		}
	}
	c, err := row.optIntIn("max_gpus_per_user", 0, 0, maxGuarantee)
	if err != nil {
		return tm, err
	}
	tm.MaxGPUsPerUser = int(c)
	return tm, nil
}

// LoadTeams reads --teams' value: the name of a team file (see ReadTeams)
// if such a file exists, or else a list such as "vision:16:1,nlp:8:1"
// (see ParseTeams).
func LoadTeams(arg string) ([]Team, error) {
	f, err := os.Open(arg)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("teams %q: %w", arg, err)
		}
		teams, perr := ParseTeams(arg)
		if perr != nil {
			return nil, fmt.Errorf("teams %q is neither a team file nor NAME:GPUS[:WEIGHT[:CAP]],...: %w", arg, perr)
		}
		return teams, nil
	}
	defer f.Close()
	return ReadTeams(f, arg)
}

// ParseDuration reads a duration in seconds: a number of seconds ("3600",
// "90.5"), or a number with a unit, s, m, h or d ("600s", "90m", "168h",
// "7d"). It refuses negative, NaN and infinite values.
func ParseDuration(s string) (float64, error) {
	t := strings.TrimSpace(s)
	unit := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 's':
			t = t[:n-1]
		case 'm':
			unit, t = 60, t[:n-1]
		case 'h':
			unit, t = 3600, t[:n-1]
		case 'd':
			unit, t = 86400, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || !(v >= 0) || math.IsInf(v, 1) {
		return 0, fmt.Errorf("duration %q: want seconds, or a number with s, m, h or d, such as 7d", s)
	}
	return v * unit, nil
}

// AssignTeams gives each job that names no team one of the teams of
// spec, "NAME:SHARE,..." such as "vision:60,nlp:30,speech:10": a job goes
// to a team with a probability in proportion to its share, drawn from a
// hash of the job's ID, so that the same trace always splits the same
// way. It is for traces without a team column (tiresias, openb), to
// simulate fair share over real arrivals. It returns how many jobs it
// assigned.
func AssignTeams(jobs []Job, spec string) (int, error) {
	type part struct {
		name string
		upTo float64
	}
	var parts []part
	total := 0.0
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, share, ok := strings.Cut(item, ":")
		name = strings.TrimSpace(name)
		v, err := strconv.ParseFloat(strings.TrimSpace(share), 64)
		if !ok || name == "" || err != nil || !(v > 0) || math.IsInf(v, 1) {
			return 0, fmt.Errorf("team split %q: want NAME:SHARE with a positive share", item)
		}
		if seen[name] {
			return 0, fmt.Errorf("team split: %q appears twice", name)
		}
		seen[name] = true
		total += v
		parts = append(parts, part{name, total})
	}
	if len(parts) == 0 {
		return 0, errors.New("team split: no teams")
	}
	n := 0
	for i := range jobs {
		if jobs[i].Team != "" {
			continue
		}
		u := float64(splitmix64(uint64(jobs[i].ID))>>11) / (1 << 53) * total
		k := 0
		for k < len(parts)-1 && u >= parts[k].upTo {
			k++
		}
		jobs[i].Team = parts[k].name
		n++
	}
	return n, nil
}

// UnitHash maps a job ID to [0, 1), the same every run: for choices a
// replay makes per job that must not change from one run to the next.
func UnitHash(id int64) float64 { return float64(splitmix64(uint64(id))>>11) / (1 << 53) }

// splitmix64 is a fixed, well-mixed hash of x (Steele, Lea and Flood,
// "Fast splittable pseudorandom number generators", OOPSLA'14).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
