package trace

import "errors"

// seconds parses a time or duration: a finite number in [0, maxSeconds].
func seconds(r row, col string) (float64, error) {
	v, err := r.nonNegFloat(col)
	if err == nil && v > maxSeconds {
		err = r.errorf(col, "%v seconds is out of range", v)
	}
	return v, err
}

// idSet finds duplicate job IDs and names the line that used one first.
// While the IDs increase, as traces mostly number their jobs, none can
// repeat, and it only lists them with their lines; from the first that
// does not, it keeps them in a map.
type idSet struct {
	rows int
	seq  []idLine      // the IDs so far, increasing, while m is nil
	m    map[int64]int // line by ID
}

type idLine struct {
	id   int64
	line int
}

// newIDSet makes a set for about rows IDs.
func newIDSet(rows int) *idSet { return &idSet{rows: rows, seq: make([]idLine, 0, rows)} }

func (s *idSet) add(r row, col string, id int64) error {
	if s.m == nil {
		if n := len(s.seq); n == 0 || id > s.seq[n-1].id {
			s.seq = append(s.seq, idLine{id, r.line})
			return nil
		}
		s.m = make(map[int64]int, max(s.rows, len(s.seq)+1))
		for _, x := range s.seq {
			s.m[x.id] = x.line
		}
		s.seq = nil
	}
	if first, dup := s.m[id]; dup {
		return r.errorf(col, "job id %d already used on line %d", id, first)
	}
	s.m[id] = r.line
	return nil
}

// checkNotEmpty refuses a trace without jobs: a run over it would report
// nothing, which is more likely a wrong file than a wish.
func checkNotEmpty(tr *Trace) error {
	if len(tr.Jobs) == 0 {
		return &ParseError{File: tr.Name, Err: errors.New("trace has no jobs")}
	}
	return nil
}
