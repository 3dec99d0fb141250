package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// ParseError reports a bad row or header of a trace or cluster file.
type ParseError struct {
	File   string
	Line   int    // 1-based; 0 when the error is not tied to a line
	Column string // the column at fault, "" when the whole row is
	Err    error
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Column != "" {
		fmt.Fprintf(&b, ": column %s", e.Column)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *ParseError) Unwrap() error { return e.Err }

// table reads a CSV file with a header line, column by name.
type table struct {
	name   string
	r      *csv.Reader
	header []string
	cols   map[string]int
	rows   int // how many rows to expect, 0 when unknown (sizedReader)
}

// openTable reads the header line of a CSV file. Lines starting with '#'
// are comments; blank lines are skipped.
func openTable(r io.Reader, name string) (*table, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &ParseError{File: name, Err: errors.New("empty file: no header line")}
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	t := &table{name: name, r: cr, header: append([]string(nil), header...), cols: make(map[string]int, len(header))}
	if s, ok := r.(sizedReader); ok {
		t.rows = s.rows
	}
	line, _ := cr.FieldPos(0)
	for i, h := range t.header {
		c := normalizeColumn(h)
		if c == "" {
			return nil, &ParseError{File: name, Line: line, Err: fmt.Errorf("header column %d has no name", i+1)}
		}
		if _, dup := t.cols[c]; dup {
			return nil, &ParseError{File: name, Line: line, Column: c, Err: errors.New("column appears twice in the header")}
		}
		t.cols[c] = i
	}
	return t, nil
}

// require fails unless the header has every named column.
func (t *table) require(names ...string) error {
	var missing []string
	for _, n := range names {
		if _, ok := t.cols[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return &ParseError{File: t.name, Line: 1, Err: fmt.Errorf("header lacks column(s) %s (has %s)",
			strings.Join(missing, ", "), strings.Join(t.header, ","))}
	}
	return nil
}

// only fails if the header has a column not in allowed.
func (t *table) only(allowed []string) error {
	ok := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		ok[a] = true
	}
	for _, h := range t.header {
		if c := normalizeColumn(h); !ok[c] {
			return &ParseError{File: t.name, Line: 1, Column: c, Err: fmt.Errorf("unknown column (known: %s)", strings.Join(allowed, ", "))}
		}
	}
	return nil
}

// next returns the next row, or io.EOF after the last.
func (t *table) next() (row, error) {
	rec, err := t.r.Read()
	if err != nil {
		if err == io.EOF {
			return row{}, io.EOF
		}
		return row{}, csvError(t.name, err)
	}
	line, _ := t.r.FieldPos(0)
	return row{t: t, rec: rec, line: line}, nil
}

// each calls f on every remaining row, in order, and stops at the first
// error, its own or f's.
func (t *table) each(f func(row) error) error {
	for {
		r, err := t.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(r); err != nil {
			return err
		}
	}
}

// row is one record of a table; its accessors return ParseErrors.
type row struct {
	t    *table
	rec  []string
	line int
}

func (r row) errorf(col, format string, args ...any) error {
	return &ParseError{File: r.t.name, Line: r.line, Column: col, Err: fmt.Errorf(format, args...)}
}

// has reports whether the table has the column.
func (r row) has(col string) bool {
	_, ok := r.t.cols[col]
	return ok
}

// str returns a column's trimmed text, "" when the table lacks it.
func (r row) str(col string) string {
	i, ok := r.t.cols[col]
	if !ok {
		return ""
	}
	return strings.TrimSpace(r.rec[i])
}

// float parses a finite number; an empty cell is an error.
func (r row) float(col string) (float64, error) {
	s := r.str(col)
	if s == "" {
		return 0, r.errorf(col, "empty value")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, r.errorf(col, "%q is not a number", s)
	}
	return v, nil
}

// nonNegFloat parses a finite number that is zero or more.
func (r row) nonNegFloat(col string) (float64, error) {
	v, err := r.float(col)
	if err == nil && v < 0 {
		err = r.errorf(col, "%v is negative", v)
	}
	return v, err
}

// int parses an integer; an empty cell is an error.
func (r row) int(col string) (int64, error) {
	s := r.str(col)
	if s == "" {
		return 0, r.errorf(col, "empty value")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, r.errorf(col, "%q is not an integer", s)
	}
	return v, nil
}

// intIn parses an integer within [lo, hi].
func (r row) intIn(col string, lo, hi int64) (int64, error) {
	v, err := r.int(col)
	if err == nil && (v < lo || v > hi) {
		err = r.errorf(col, "%d is out of range [%d, %d]", v, lo, hi)
	}
	return v, err
}

// optIntIn is intIn with a default for an absent column or an empty cell.
func (r row) optIntIn(col string, def, lo, hi int64) (int64, error) {
	if r.str(col) == "" {
		return def, nil
	}
	return r.intIn(col, lo, hi)
}

func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{File: name, Line: pe.Line, Err: pe.Err}
	}
	return &ParseError{File: name, Err: err}
}

func normalizeColumn(h string) string {
	return strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
}

// Limits on what a trace may ask for, to refuse nonsense early.
const (
	maxGPUsPerJob = 1 << 20
	maxSeconds    = 1e12 // about 31,700 years
)
