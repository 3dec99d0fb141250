package web

import (
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/templates"
)

// errorTitles say in a few words what each status means to a person.
var errorTitles = map[int]string{
	http.StatusBadRequest:      "That request was not right",
	http.StatusUnauthorized:    "Log in first",
	http.StatusForbidden:       "You may not see this",
	http.StatusNotFound:        "Page not found",
	http.StatusTooManyRequests: "Too many requests",
}

// errorView is the page for an error with status code and message msg.
func errorView(c echo.Context, code int, msg string) templates.ErrorView {
	v := templates.ErrorView{Code: code, Title: errorTitles[code], Message: sentence(msg),
		Back: backTo(c.Request()), Home: "/jobs", HomeLabel: "Go to the jobs list"}
	if v.Title == "" {
		v.Title = http.StatusText(code)
	}
	switch {
	case code == http.StatusInternalServerError:
		// The cause is in the log, not for the page.
		v.Title, v.Message = "Something went wrong", "The portal could not do this; it logged the cause. Try again in a moment."
	case code > 500:
		v.Title = "Not possible right now"
	}
	if code == http.StatusNotFound && msg == http.StatusText(code) {
		v.Message = "There is no page at " + c.Request().URL.Path + "."
	}
	if currentUser(c) == nil {
		v.Home, v.HomeLabel = "/login", "Log in"
	}
	return v
}

// sentence makes an error message read as a sentence on a page: "only
// admins may do this" becomes "Only admins may do this."
func sentence(msg string) string {
	r, n := utf8.DecodeRuneInString(msg)
	if n == 0 {
		return msg
	}
	msg = string(unicode.ToUpper(r)) + msg[n:]
	if !strings.ContainsAny(msg[len(msg)-1:], ".!?") {
		msg += "."
	}
	return msg
}

// backTo is the page on this site that sent the person here, from the
// Referer header, as a path; "" when it is unknown, elsewhere, or this
// very page.
func backTo(r *http.Request) string {
	ref, err := url.Parse(r.Referer())
	if err != nil || ref.Host != r.Host || ref.Path == "" || ref.Path == r.URL.Path {
		return ""
	}
	back := url.URL{Path: ref.Path, RawQuery: ref.RawQuery}
	return safeNext(back.String())
}

// renderError answers a page request that failed with a page that says
// why, in the portal's frame, with a way back.
func (s *Server) renderError(c echo.Context, code int, msg string) error {
	v := errorView(c, code, msg)
	return s.render(c, code, templates.ErrorPage(page(c, v.Title, ""), v))
}
