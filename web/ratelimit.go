package web

import "time"

// loginLimit bounds failed logins: at most loginFailures per key within
// loginWindow, counted per client address and per user name, so that
// neither one address nor many addresses can guess one password quickly
// (core/ratelimit).
const (
	loginFailures = 10
	loginWindow   = 10 * time.Minute
)
