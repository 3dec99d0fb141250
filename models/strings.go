package models

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
)

// Strings is a list of strings stored as a JSON text column.
type Strings []string

// Value implements driver.Valuer.
func (s Strings) Value() (driver.Value, error) {
	if s == nil {
		return "[]", nil
	}
	b, err := json.Marshal([]string(s))
	if err != nil {
		return nil, fmt.Errorf("encode strings: %w", err)
	}
	return string(b), nil
}

// Scan implements sql.Scanner.
func (s *Strings) Scan(v any) error {
	var b []byte
	switch t := v.(type) {
	case nil:
		*s = nil
		return nil
	case string:
		b = []byte(t)
	case []byte:
		b = t
	default:
		return fmt.Errorf("scan strings from %T", v)
	}
	var out []string
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Errorf("decode strings: %w", err)
	}
	*s = out
	return nil
}
