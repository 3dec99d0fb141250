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
type idSet map[int64]int

// newIDSet makes a set for about rows IDs.
func newIDSet(rows int) idSet { return make(idSet, rows) }

func (s idSet) add(r row, col string, id int64) error {
	if first, dup := s[id]; dup {
		return r.errorf(col, "job id %d already used on line %d", id, first)
	}
	s[id] = r.line
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
