package web

import (
	"context"
	"testing"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/models"
)

// viewOf is u as app hands an account to the web server, for a test that
// reads or makes one in the store.
func viewOf(u *models.User) *app.User {
	return &app.User{ID: u.ID, Name: u.Name, Role: app.Role(u.Role), Team: u.Team, UnixName: u.UnixName, Source: u.Source}
}

// appJobs reads the jobs ids as app hands them to the web server.
func appJobs(tb testing.TB, a *app.App, ids ...int64) []app.Job {
	tb.Helper()
	js, err := a.FollowedJobs(context.Background(), ids)
	if err != nil || len(js) != len(ids) {
		tb.Fatalf("jobs %v: %d of them, %v", ids, len(js), err)
	}
	return js
}
