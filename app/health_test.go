package app

import (
	"context"
	"errors"
	"io"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestStoreCauseOnlyForTheStore: an action's own refusal that carries a
// network error or a deadline of something other than the store (a
// machine's files helper, a what-if replay) is not a database outage.
// It used to be: the files helper's EOF, a *url.Error, read as "database
// unreachable", so the job's files answered "The database is unreachable
// since ..." and every page showed the outage banner until the next ping
// (an audit saw it on a job page while a machine was draining).
func TestStoreCauseOnlyForTheStore(t *testing.T) {
	files := filesError(&url.Error{Op: "Get", URL: "http://job-files/list?path=.&root=job", Err: io.EOF})
	replay := &Error{Kind: Unavailable, Msg: "the replay took longer than 1m0s: ask for fewer days or policies", Err: context.DeadlineExceeded}
	down := &pgconn.ConnectError{}
	for _, c := range []struct {
		name        string
		err         error
		cause       string
		unavailable bool
	}{
		{"files helper unreachable", files, "", false},
		{"files helper, wrapped", errors.Join(errors.New("list"), files), "", false},
		{"replay too long", replay, "", false},
		{"machine not connected", &Error{Kind: Unavailable, Msg: "job 3's files are on machine node-0, which is not connected to this server"}, "", false},
		{"store down, as the action says", stored(down), "database unreachable", true},
		{"store down, bare", down, "database unreachable", true},
		{"no error", nil, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := StoreCause(c.err); got != c.cause {
				t.Errorf("StoreCause = %q, want %q", got, c.cause)
			}
			if got := StoreUnavailable(c.err); got != c.unavailable {
				t.Errorf("StoreUnavailable = %v, want %v", got, c.unavailable)
			}
		})
	}
}
