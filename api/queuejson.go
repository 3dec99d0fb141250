package api

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends q as encoding/json's Marshal writes it, byte for
// byte (HTML-escaped strings, its floats, RFC 3339 times), without
// reflection: GET /api/v1/queues answers 200 jobs, and encoding/json
// spent a quarter of the read's CPU on them at 10,000 queued (issue 33),
// half of that on the four times of each forecast (each written by
// Time.MarshalJSON, then checked again by encoding/json). It fails
// where Marshal fails (a float that is not a number, a year past 9999);
// TestQueuesAppendJSON compares the two.
func (q *Queues) AppendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"policy":`...)
	b = appendJSONString(b, q.Policy)
	b = append(b, `,"thresholds":`...)
	if q.Thresholds == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, f := range q.Thresholds {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendJSONFloat(b, f); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"queues":`...)
	if q.Queues == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range q.Queues {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = q.Queues[i].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"as_of":`...)
	if b, err = appendJSONTime(b, q.AsOf); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// appendJSON appends qu as encoding/json writes it.
func (qu *Queue) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(qu.Index), 10)
	b = append(b, `,"from":`...)
	if b, err = appendJSONFloat(b, qu.From); err != nil {
		return nil, err
	}
	b = append(b, `,"to":`...)
	if b, err = appendJSONFloat(b, qu.To); err != nil {
		return nil, err
	}
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(qu.Total), 10)
	b = append(b, `,"running":`...)
	b = strconv.AppendInt(b, int64(qu.Running), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, int64(qu.Offset), 10)
	if qu.NextCursor != "" {
		b = append(b, `,"next_cursor":`...)
		b = appendJSONString(b, qu.NextCursor)
	}
	b = append(b, `,"jobs":`...)
	if qu.Jobs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range qu.Jobs {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = qu.Jobs[i].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

// appendJSON appends j as encoding/json writes it.
func (j *QueueJob) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, j.ID, 10)
	if j.Name != "" {
		b = append(b, `,"name":`...)
		b = appendJSONString(b, j.Name)
	}
	b = append(b, `,"team":`...)
	b = appendJSONString(b, j.Team)
	if j.User != "" {
		b = append(b, `,"user":`...)
		b = appendJSONString(b, j.User)
	}
	b = append(b, `,"gpus":`...)
	b = strconv.AppendInt(b, int64(j.GPUs), 10)
	b = append(b, `,"state":`...)
	b = appendJSONString(b, string(j.State))
	b = append(b, `,"executed_s":`...)
	if b, err = appendJSONFloat(b, j.ExecutedS); err != nil {
		return nil, err
	}
	b = append(b, `,"attained_service_gpu_s":`...)
	if b, err = appendJSONFloat(b, j.AttainedService); err != nil {
		return nil, err
	}
	b = append(b, `,"borrowed":`...)
	b = strconv.AppendBool(b, j.Borrowed)
	if j.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, j.Reason)
	}
	if j.Priority != "" {
		b = append(b, `,"priority":`...)
		b = appendJSONString(b, j.Priority)
	}
	if j.Position != 0 {
		b = append(b, `,"position":`...)
		b = strconv.AppendInt(b, int64(j.Position), 10)
	}
	if f := j.Forecast; f != nil {
		b = append(b, `,"forecast":{"state":`...)
		b = appendJSONString(b, f.State)
		for _, t := range []struct {
			key string
			at  *time.Time
		}{{`,"earliest":`, f.Earliest}, {`,"likely":`, f.Likely}, {`,"latest":`, f.Latest}} {
			b = append(b, t.key...)
			if b, err = appendJSONTimePtr(b, t.at); err != nil {
				return nil, err
			}
		}
		if f.Reason != "" {
			b = append(b, `,"reason":`...)
			b = appendJSONString(b, f.Reason)
		}
		b = append(b, `,"made_at":`...)
		if b, err = appendJSONTimePtr(b, f.MadeAt); err != nil {
			return nil, err
		}
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// appendJSONString appends s quoted as encoding/json's Marshal quotes
// it: a string of printable ASCII other than what HTML escapes as is,
// any other by Marshal itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json writes a float64: like
// %g, with the exponent cutoffs of ES6 and no padded exponents.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 as e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendJSONTime appends t as Time.MarshalJSON writes it (AppendText
// writes the same RFC 3339 text and fails where it fails).
func appendJSONTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, fmt.Errorf("json: error calling MarshalJSON for type time.Time: %w", err)
	}
	return append(b, '"'), nil
}

// appendJSONTimePtr is appendJSONTime, null for nil.
func appendJSONTimePtr(b []byte, t *time.Time) ([]byte, error) {
	if t == nil {
		return append(b, "null"...), nil
	}
	return appendJSONTime(b, *t)
}
