package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// Every JSON body the API reads goes through decodeJSON, which reads it
// strictly: one JSON value and nothing after it, only the fields its
// type has, text in UTF-8, and numbers that keep their value. Go's
// decoder alone would take {"command":["x"]} {"x":1} as its first object,
// turn invalid UTF-8 (raw, or escaped as a lone surrogate) into U+FFFD,
// and read 1e-400 as 0: a request silently altered, not refused.

// decodeJSON reads the request's JSON body into v, strictly (strictJSON);
// its errors are 400s that name the field at fault, or a 413 for a body
// over its route's limit (limitBody).
func decodeJSON(c echo.Context, v any) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("body: at most %d bytes", tooLarge.Limit))
		}
		return echo.NewHTTPError(http.StatusBadRequest, "body: could not be read: "+err.Error())
	}
	if err := strictJSON(body, v); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}
	return nil
}

// noFields refuses a body that asks for something the request does not
// take: an action such as a resubmit or a drain has no fields, so a body
// must be empty or {}; {"gpus": 4} is a 400 naming gpus, not a copy of
// the job on as many GPUs as before.
func noFields(c echo.Context) error {
	var none struct{}
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return decodeJSON(c, &none) // the same errors as any body's
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := strictJSON(body, &none); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "this request takes no fields: "+err.Error())
	}
	return nil
}

// strictJSON decodes body, one JSON value, into v, refusing unknown
// fields, anything but white space after the value, text that is not
// UTF-8 and numbers that round to zero. Its errors name the field at
// fault ("command: ...", "sim.duration_s: ...") or the body.
func strictJSON(body []byte, v any) error {
	// The decoder first: it names unknown fields and values of the
	// wrong kind; then what it would have let through, altered.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(jsonError(err))
	}
	return checkJSONText(body)
}

// jsonFrame is an object or array being read by checkJSONText.
type jsonFrame struct {
	object  bool
	key     string // the key of the value being read, in an object
	wantKey bool   // the next string is a key
}

// checkJSONText walks body's tokens and refuses, naming the field, a
// string (key or value) that is not UTF-8 or holds an escaped lone
// surrogate, a number that is not zero but reads as zero, and data after
// the first value. Syntax errors in the value are the decoder's to
// report (strictJSON runs it first).
func checkJSONText(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []jsonFrame
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			// Not met after the decoder read the value, but not let pass.
			return fmt.Errorf("body is not valid JSON (at byte %d)", dec.InputOffset())
		}
		raw := body[start:dec.InputOffset()]
		var top *jsonFrame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' || t == '[' {
				stack = append(stack, jsonFrame{object: t == '{', wantKey: t == '{'})
				continue
			}
			stack = stack[:len(stack)-1]
		case string:
			if top != nil && top.object && top.wantKey {
				if msg := jsonStringProblem(raw); msg != "" {
					return fmt.Errorf("%s: a key %s", jsonPath(stack, false), msg)
				}
				top.key, top.wantKey = t, false
				continue
			}
			if msg := jsonStringProblem(raw); msg != "" {
				return fmt.Errorf("%s: %s", jsonPath(stack, true), msg)
			}
		case json.Number:
			if f, _ := strconv.ParseFloat(string(t), 64); f == 0 && strings.Trim(mantissa(string(t)), "0.") != "" {
				return fmt.Errorf("%s: %s is too small: it would be read as 0", jsonPath(stack, true), t)
			}
		}
		// A value ended: the object's next key, or the body's end.
		if len(stack) == 0 {
			if _, err := dec.Token(); err != io.EOF {
				return fmt.Errorf("body: more data after the JSON value (at byte %d): send one JSON value", skipSpace(body, dec.InputOffset()))
			}
			return nil
		}
		if top := &stack[len(stack)-1]; top.object {
			top.wantKey = true
		}
	}
}

// jsonPath names the value being read in stack as a field, such as
// "sim.duration_s" or "env.LR"; "body" at the top. Items of a list are
// named by their list.
func jsonPath(stack []jsonFrame, value bool) string {
	var keys []string
	for i, f := range stack {
		if f.object && (value || i < len(stack)-1) && f.key != "" {
			keys = append(keys, f.key)
		}
	}
	if len(keys) == 0 {
		return "body"
	}
	return strings.Join(keys, ".")
}

// skipSpace is the offset of the first byte of body from off that is not
// white space.
func skipSpace(body []byte, off int64) int64 {
	for off < int64(len(body)) && strings.IndexByte(" \t\r\n", body[off]) >= 0 {
		off++
	}
	return off
}

// mantissa is a JSON number without its sign and exponent.
func mantissa(n string) string {
	n = strings.TrimPrefix(n, "-")
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		n = n[:i]
	}
	return n
}

// jsonStringProblem says what is wrong with raw, the text of one JSON
// string token (with its quotes, maybe after a separator), as
// textProblem does: bytes that are not UTF-8 or an escaped lone
// surrogate (Go's decoder turns both into U+FFFD), or an escaped NUL;
// "" when nothing is.
func jsonStringProblem(raw []byte) string {
	if !utf8.Valid(raw) {
		return "is not valid UTF-8"
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw, i+1)
		if !ok {
			return "is not valid JSON"
		}
		i += 4
		switch {
		case r == 0:
			return "contains a NUL byte"
		case utf16.IsSurrogate(r) && r < 0xdc00: // a high surrogate: a low one must follow
			lo, ok := hex4(raw, i+3)
			if !ok || raw[i+1] != '\\' || raw[i+2] != 'u' || utf16.DecodeRune(r, lo) == utf8.RuneError {
				return "is not valid UTF-8 (a lone surrogate)"
			}
			i += 6
		case utf16.IsSurrogate(r): // a low surrogate alone
			return "is not valid UTF-8 (a lone surrogate)"
		}
	}
	return ""
}

// hex4 reads the four hex digits of a \u escape at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw[i:i+4]), 16, 16)
	return rune(n), err == nil
}

// jsonError explains a decoding error in terms of the request's fields.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "body"
		}
		return fmt.Sprintf("%s: must be %s", field, jsonKind(te.Type))
	case errors.As(err, &se):
		return fmt.Sprintf("body is not valid JSON (at byte %d)", se.Offset)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "body is not valid JSON (it ends too early)"
	case errors.Is(err, io.EOF):
		return "body is empty: send JSON"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names what a JSON value of Go type t looks like, for people.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "a JSON object"
}
