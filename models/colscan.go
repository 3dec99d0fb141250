package models

import (
	"fmt"
	"strconv"
	"time"
)

// Column scanners: each reads one column's value, as either driver gives
// it, into a field of a struct, NULL as the field's zero (as gorm does),
// with no reflection and no allocation of its own. A page of a queue
// reads 21 columns of 100-200 jobs on every view (issue 33); through
// gorm's Find or database/sql's conversions into int and float fields
// each column went through reflect. Each scanner is one pointer, which an
// interface holds without allocating.

// strCol scans text into a string.
type strCol struct{ p *string }

func (c strCol) Scan(v any) error {
	switch v := v.(type) {
	case string:
		*c.p = v
	case []byte:
		*c.p = string(v)
	case nil:
		*c.p = ""
	default:
		return fmt.Errorf("scan %T into a string", v)
	}
	return nil
}

// int64Col scans an integer into an int64.
type int64Col struct{ p *int64 }

func (c int64Col) Scan(v any) error {
	n, err := scanInt(v)
	*c.p = n
	return err
}

// intCol scans an integer into an int.
type intCol struct{ p *int }

func (c intCol) Scan(v any) error {
	n, err := scanInt(v)
	*c.p = int(n)
	return err
}

func scanInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case nil:
		return 0, nil
	case string:
		return parseInt(v)
	case []byte:
		return parseInt(string(v))
	default:
		return 0, fmt.Errorf("scan %T into an integer", v)
	}
}

func parseInt(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("scan %q into an integer: %w", s, err)
	}
	return n, nil
}

// float64Col scans a number into a float64: PostgreSQL gives a numeric
// column as its decimal text, parsed as database/sql parses it.
type float64Col struct{ p *float64 }

func (c float64Col) Scan(v any) error {
	switch v := v.(type) {
	case float64:
		*c.p = v
	case int64:
		*c.p = float64(v)
	case nil:
		*c.p = 0
	case string:
		return c.parse(v)
	case []byte:
		return c.parse(string(v))
	default:
		return fmt.Errorf("scan %T into a number", v)
	}
	return nil
}

func (c float64Col) parse(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("scan %q into a number: %w", s, err)
	}
	*c.p = f
	return nil
}

// timePtrCol scans a time into a *time.Time, NULL into nil.
type timePtrCol struct{ p **time.Time }

func (c timePtrCol) Scan(v any) error {
	switch v := v.(type) {
	case time.Time:
		*c.p = &v
	case nil:
		*c.p = nil
	default:
		return fmt.Errorf("scan %T into a time", v)
	}
	return nil
}

// timeCol scans a time into a time.Time, NULL into the zero time.
type timeCol struct{ p *time.Time }

func (c timeCol) Scan(v any) error {
	switch v := v.(type) {
	case time.Time:
		*c.p = v
	case nil:
		*c.p = time.Time{}
	default:
		return fmt.Errorf("scan %T into a time", v)
	}
	return nil
}
