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
	var text string
	switch t := v.(type) {
	case nil:
		*s = nil
		return nil
	case string:
		text = t
	case []byte:
		text = string(t)
	default:
		return fmt.Errorf("scan strings from %T", v)
	}
	switch text { // most lists are empty: read as json.Unmarshal reads them, without its reflection
	case "[]":
		*s = Strings{}
		return nil
	case "null":
		*s = nil
		return nil
	}
	var out []string
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return fmt.Errorf("decode strings: %w", err)
	}
	*s = out
	return nil
}
