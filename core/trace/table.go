package trace

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unsafe"
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
	plain  *plainReader // instead of r, for a file without quotes or carriage returns
	header []string
	cols   map[string]int
	names  []string // the normalized header, index by index, when it is short (index)
	rows   int      // how many rows to expect, 0 when unknown (sizedReader)
}

// openTable reads the header line of a CSV file. Lines starting with '#'
// are comments; blank lines are skipped.
func openTable(r io.Reader, name string) (*table, error) {
	t := &table{name: name}
	if s, ok := r.(sizedReader); ok {
		t.rows = s.rows
		if s.data != nil && plainCSV(s.data) {
			// The fields are slices of the file's bytes, not of a copy:
			// nothing writes data once ReadFile has read it (sizedReader).
			t.plain = &plainReader{s: unsafe.String(unsafe.SliceData(s.data), len(s.data))}
		}
	}
	if t.plain == nil {
		t.r = csv.NewReader(r)
		t.r.Comment = '#'
		t.r.ReuseRecord = true
	}
	header, line, err := t.read()
	if err == io.EOF {
		return nil, &ParseError{File: name, Err: errors.New("empty file: no header line")}
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	t.header, t.cols = append([]string(nil), header...), make(map[string]int, len(header))
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
	if len(t.header) <= maxScanColumns {
		t.names = make([]string, len(t.header))
		for c, i := range t.cols {
			t.names[i] = c
		}
	}
	return t, nil
}

// maxScanColumns: a table of up to this many columns finds a column by
// comparing its name with each (index), cheaper than hashing it for
// every cell read.
const maxScanColumns = 16

// index returns the position of column col, and whether the table has it.
func (t *table) index(col string) (int, bool) {
	if t.names == nil {
		i, ok := t.cols[col]
		return i, ok
	}
	for i, c := range t.names {
		if c == col {
			return i, true
		}
	}
	return 0, false
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
	rec, line, err := t.read()
	if err != nil {
		if err == io.EOF {
			return row{}, io.EOF
		}
		return row{}, csvError(t.name, err)
	}
	return row{t: t, rec: rec, line: line}, nil
}

// read returns the next record and its line, valid until the next read.
func (t *table) read() ([]string, int, error) {
	if t.plain != nil {
		return t.plain.read()
	}
	rec, err := t.r.Read()
	if err != nil {
		return nil, 0, err
	}
	line, _ := t.r.FieldPos(0)
	return rec, line, nil
}

// plainCSV tells whether data holds no quotes, and carriage returns
// only at the ends of lines (before a newline, or as the last byte):
// then every line, less its line ending, is a record of its
// comma-separated fields as they are, and plainReader reads it as
// encoding/csv would.
func plainCSV(data []byte) bool {
	if bytes.IndexByte(data, '"') >= 0 {
		return false
	}
	for rest := data; ; {
		k := bytes.IndexByte(rest, '\r')
		if k < 0 {
			return true
		}
		if k+1 < len(rest) && rest[k+1] != '\n' {
			return false
		}
		rest = rest[k+1:]
	}
}

// plainReader reads the records of a CSV file that plainCSV accepts, as
// a csv.Reader with Comment '#' and ReuseRecord does (blank lines and
// comment lines skipped, "\r\n" read as "\n", every record as wide as
// the first), without copying: the fields are slices of s.
type plainReader struct {
	s      string
	off    int // where the next line begins
	line   int // lines read
	fields int // the first record's fields: every record must have as many
	rec    []string
}

func (p *plainReader) read() ([]string, int, error) {
	for p.off < len(p.s) {
		rest := p.s[p.off:]
		ln := rest
		if k := strings.IndexByte(rest, '\n'); k >= 0 {
			ln, p.off = rest[:k], p.off+k+1
		} else {
			p.off = len(p.s)
		}
		p.line++
		if n := len(ln); n > 0 && ln[n-1] == '\r' {
			ln = ln[:n-1] // plainCSV: it ends the line
		}
		if ln == "" || ln[0] == '#' {
			continue // a blank line (a last one has no newline, so is none) or a comment
		}
		p.rec = p.rec[:0]
		for {
			k := strings.IndexByte(ln, ',')
			if k < 0 {
				p.rec = append(p.rec, ln)
				break
			}
			p.rec = append(p.rec, ln[:k])
			ln = ln[k+1:]
		}
		if p.fields == 0 {
			p.fields = len(p.rec)
		} else if len(p.rec) != p.fields {
			return nil, 0, &csv.ParseError{StartLine: p.line, Line: p.line, Column: 1, Err: csv.ErrFieldCount}
		}
		return p.rec, p.line, nil
	}
	return nil, 0, io.EOF
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
	_, ok := r.t.index(col)
	return ok
}

// str returns a column's trimmed text, "" when the table lacks it.
func (r row) str(col string) string {
	i, ok := r.t.index(col)
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
