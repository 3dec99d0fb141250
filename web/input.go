package web

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// checkInputText refuses, before its handler runs, a request to the
// portal's pages or API whose path parameters, query or form (urlencoded
// or multipart) hold text that is not UTF-8 or holds a NUL byte: a 400
// naming the field. Such text would otherwise be stored altered (JSON
// columns turn it into U+FFFD) or refused by PostgreSQL with a 500. JSON
// bodies are checked the same way by decodeJSON.
func checkInputText(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := checkURLText(c); err != nil {
			return err
		}
		if !hasForm(c.Request()) {
			return next(c)
		}
		if json, err := jsonAsForm(c.Request()); err != nil {
			return err
		} else if json {
			return next(c) // decodeJSON checks it
		}
		form, err := c.FormParams()
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("body: at most %d bytes", tooLarge.Limit))
		case err != nil:
			return badRequest("body: the form could not be read")
		}
		if err := checkValues(form); err != nil {
			return err
		}
		return next(c)
	}
}

// checkURLText is checkInputText for the path's parameters and the
// query alone, for a route that reads its body as it streams (an upload)
// and checks its fields itself.
func checkURLText(c echo.Context) error {
	for i, name := range c.ParamNames() {
		if i < len(c.ParamValues()) {
			if msg := textProblem(c.ParamValues()[i]); msg != "" {
				return badRequest("%s: %s", name, msg)
			}
		}
	}
	return checkValues(c.QueryParams())
}

// checkURLTextOnly is checkURLText as a middleware.
func checkURLTextOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := checkURLText(c); err != nil {
			return err
		}
		return next(c)
	}
}

// jsonAsForm reports whether r's body, sent as a form, is JSON: what
// `curl -d '{...}'` sends, as the API's examples do. Every API route takes
// JSON, so such a body is read as JSON (the body is put back for the
// handler) rather than parsed as an empty form.
func jsonAsForm(r *http.Request) (bool, error) {
	if !strings.HasPrefix(r.Header.Get(echo.HeaderContentType), echo.MIMEApplicationForm) {
		return false, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return false, echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("body: at most %d bytes", tooLarge.Limit))
		}
		return false, badRequest("body: could not be read")
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	return len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '['), nil
}

// hasForm reports whether r carries a form in its body.
func hasForm(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return false
	}
	ct := r.Header.Get(echo.HeaderContentType)
	return strings.HasPrefix(ct, echo.MIMEApplicationForm) || strings.HasPrefix(ct, echo.MIMEMultipartForm)
}

// checkValues refuses, naming the field, a name or value of vs that
// textProblem finds at fault.
func checkValues(vs url.Values) error {
	for name, values := range vs {
		if msg := textProblem(name); msg != "" {
			return badRequest("a field's name %s", msg)
		}
		for _, v := range values {
			if msg := textProblem(v); msg != "" {
				if len(name) > 64 {
					name = name[:61] + "..."
				}
				return badRequest("%s: %s", name, msg)
			}
		}
	}
	return nil
}

// textProblem says what is wrong with text that people typed: not UTF-8,
// or a NUL byte; "" when nothing is.
func textProblem(v string) string {
	switch {
	case !utf8.ValidString(v):
		return "is not valid UTF-8"
	case strings.IndexByte(v, 0) >= 0:
		return "contains a NUL byte"
	}
	return ""
}
