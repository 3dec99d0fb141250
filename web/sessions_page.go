package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

// The user's sessions as cards (GET /sessions): each with its state, the
// time left before its time limit, whether it is idle, and its open
// button, from the same figures as the job's page (moment.job, the idle
// detector, sessionView).

// Sessions shown: every one that waits or runs, and this many ended.
const (
	maxSessionsRead  = 200
	endedSessionsMax = 10
)

func (s *Server) sessionsPage(c echo.Context) error {
	ctx := c.Request().Context()
	u := currentUser(c)
	js, err := s.app.UserSessions(ctx, appActor(c), maxSessionsRead)
	if err != nil {
		return err
	}
	m, err := s.moment(ctx)
	if err != nil {
		return err
	}
	ptrs := make([]*models.Job, len(js))
	for i := range js {
		ptrs[i] = &js[i]
	}
	idle, err := s.idleStates(ctx, ptrs, m.now)
	if err != nil {
		return err
	}
	var v templates.Sessions
	for i := range js {
		j := &js[i]
		aj := m.job(j)
		card := templates.SessionCard{JobRow: jobRow(aj, m.now), Ended: j.State.Final(), TimeLeft: "no time limit", Activity: "—"}
		if sv := s.sessionView(u, j); sv != nil {
			card.Type, card.URL, card.Note = sv.Type, sv.URL, sv.Note
		}
		switch {
		case card.Ended:
			card.TimeLeft = "ended " + card.Finished
		case aj.TimeLeftS != nil && *aj.TimeLeftS <= 0:
			card.TimeLeft = "none: its time limit is reached"
		case aj.TimeLeftS != nil:
			card.TimeLeft = job.FormatTimeLimit(secs(*aj.TimeLeftS)) + " left of " + job.FormatTimeLimit(secs(*aj.TimeLimitS))
		}
		if j.State.Waiting() {
			card.Waiting = card.Reason
			if card.ETAText != "" {
				card.Waiting += "; expected start: " + card.ETAText
			}
		}
		if j.State == job.Running {
			card.Activity = "in use"
			if st := idle[j.ID]; st != nil && st.Idle {
				card.Idle, card.IdleText = st.Short(m.now), "idle "+st.Text(m.now, time.Local)
				card.Activity = card.IdleText
			}
		}
		if card.Ended {
			if len(v.Ended) < endedSessionsMax {
				v.Ended = append(v.Ended, card)
			}
			continue
		}
		v.Active = append(v.Active, card)
	}
	return s.render(c, http.StatusOK, templates.SessionsPage(page(c, "My sessions", "sessions"), v))
}
