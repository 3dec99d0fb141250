package gpu

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SimFault is a GPU failure to inject into a simulated machine, so that
// tests and demos see what a failing GPU does: its error counters grow,
// the jobs that fail on it are requeued and it takes no new jobs.
type SimFault struct {
	GPU int // the GPU's index
	// XID is the XID error the GPU reports (such as 79, fell off the
	// bus); 0 for none.
	XID int
	// ECC is how many uncorrected ECC errors the GPU reports.
	ECC uint64
	// After is how long after a job first starts on the GPU the fault
	// occurs.
	After time.Duration
}

// String writes f as ParseSimFaults reads it.
func (f SimFault) String() string {
	kind := "ecc"
	if f.XID > 0 {
		kind = "xid" + strconv.Itoa(f.XID)
	}
	return fmt.Sprintf("%d:%s@%s", f.GPU, kind, f.After)
}

// ParseSimFaults reads a comma-separated list of faults, each
// GPU:KIND[@AFTER] where KIND is xidN (an XID error with code N) or ecc
// (an uncorrected ECC error) and AFTER a duration (default 1s): "0:xid79@2s"
// makes GPU 0 report XID 79 two seconds after a job first starts on it.
func ParseSimFaults(s string) ([]SimFault, error) {
	var out []SimFault
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		f, err := parseSimFault(item)
		if err != nil {
			return nil, fmt.Errorf("fault %q: %w (want GPU:xidN[@AFTER] or GPU:ecc[@AFTER], such as 0:xid79@2s)", item, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func parseSimFault(item string) (SimFault, error) {
	f := SimFault{After: time.Second}
	idx, rest, ok := strings.Cut(item, ":")
	if !ok {
		return f, fmt.Errorf("no GPU index")
	}
	g, err := strconv.Atoi(idx)
	if err != nil || g < 0 || g > 4095 {
		return f, fmt.Errorf("GPU index %q: want a number from 0 to 4095", idx)
	}
	f.GPU = g
	kind, after, hasAfter := strings.Cut(rest, "@")
	if hasAfter {
		d, err := time.ParseDuration(after)
		if err != nil || d < 0 {
			return f, fmt.Errorf("delay %q: want a duration such as 2s", after)
		}
		f.After = d
	}
	switch {
	case kind == "ecc":
		f.ECC = 1
	case strings.HasPrefix(kind, "xid"):
		code, err := strconv.Atoi(kind[3:])
		if err != nil || code <= 0 || code > 1<<16 {
			return f, fmt.Errorf("XID code %q: want a positive number", kind[3:])
		}
		f.XID = code
	default:
		return f, fmt.Errorf("kind %q: want xidN or ecc", kind)
	}
	return f, nil
}

// simErrors is what a simulated GPU's error counters read.
type simErrors struct {
	ecc     uint64
	xids    uint64
	lastXID int
}

// simFault is an injected fault waiting to fire.
type simFault struct {
	SimFault
	due   time.Time // zero until a job starts on the GPU
	fired bool
}

// InjectFault has a simulated GPU fail: f occurs f.After after the next
// job starts on GPU f.GPU (or after now, if a job runs there already). A
// fault fires once.
func (s *Sim) InjectFault(f SimFault, now time.Time) error {
	if f.GPU < 0 || f.GPU >= len(s.devices) {
		return fmt.Errorf("sim %s: fault %s: no GPU %d (the machine has %d)", s.node, f, f.GPU, len(s.devices))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sf := &simFault{SimFault: f}
	if len(s.jobs[f.GPU]) > 0 {
		sf.due = now.Add(f.After)
	}
	s.faults = append(s.faults, sf)
	return nil
}

// armFaultsLocked starts the clock of the faults waiting for a job on
// GPU g.
func (s *Sim) armFaultsLocked(g int, start time.Time) {
	for _, f := range s.faults {
		if f.GPU == g && f.due.IsZero() && !f.fired {
			f.due = start.Add(f.After)
		}
	}
}

// fireFaultsLocked applies the faults due by now to the GPUs' counters.
func (s *Sim) fireFaultsLocked(now time.Time) {
	for _, f := range s.faults {
		if f.fired || f.due.IsZero() || f.due.After(now) {
			continue
		}
		f.fired = true
		e := s.errs[f.GPU]
		e.ecc += f.ECC
		if f.XID > 0 {
			e.xids++
			e.lastXID = f.XID
		}
		s.errs[f.GPU] = e
	}
}
