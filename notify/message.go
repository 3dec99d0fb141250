// Package notify delivers users' notifications: it takes the outbox rows
// the store writes with each job event (models.Notification), turns them
// into an email and a webhook request, and sends them, retrying failures
// with exponential backoff. It runs on the leader replica only, apart
// from the scheduler: a slow or dead receiver delays nothing but its own
// messages (docs/operations.md).
package notify

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/models"
)

// Message is what one notification says, whatever the channel.
type Message struct {
	Event string // models.Event*
	// Subject is the email's subject; Text the one-paragraph message
	// with the link.
	Subject, Text string
	Job           *JobInfo // nil for a test
	URL           string   // the job's page, or the portal's
	At            time.Time
	Detail        string
	User          string
}

// JobInfo is the job a message is about.
type JobInfo struct {
	ID       int64  `json:"id"`
	Name     string `json:"name"`
	User     string `json:"user"`
	Team     string `json:"team"`
	GPUs     int    `json:"gpus"`
	State    string `json:"state"`
	ExitCode *int   `json:"exit_code"`
	URL      string `json:"url"`
}

// what says what happened, as the end of "Job 42 (train) ...".
func what(event, detail string, heldAfter float64) string {
	with := func(s string) string {
		if detail == "" {
			return s
		}
		return s + ": " + detail
	}
	switch event {
	case models.EventStarted:
		return with("started")
	case models.EventSucceeded:
		return "succeeded"
	case models.EventFailed:
		return with("failed")
	case models.EventPreempted:
		return with("was preempted")
	case models.EventTimedOut:
		return with("timed out")
	case models.EventCancelled:
		return with("was cancelled")
	case models.EventHeld:
		return with("has waited more than " + hours(heldAfter))
	case models.EventIdle:
		return with("holds idle GPUs and will be reclaimed")
	case models.EventReclaimed:
		return with("lost its borrowed GPUs")
	}
	return with(event)
}

// hours writes h hours for people: "6 hours", "1 hour", "30 minutes".
func hours(h float64) string {
	if d := time.Duration(h * float64(time.Hour)); d < time.Minute {
		return fmt.Sprintf("%d seconds", int(d/time.Second))
	}
	if h < 1 {
		m := int(h*60 + 0.5)
		if m == 1 {
			return "1 minute"
		}
		return strconv.Itoa(m) + " minutes"
	}
	if h == 1 {
		return "1 hour"
	}
	return strconv.FormatFloat(h, 'f', -1, 64) + " hours"
}

// NewMessage builds the message of notification n about job j (nil for
// a test), for user, with links under base (the portal's public URL).
// heldAfter is the user's held threshold in hours.
func NewMessage(n *models.Notification, j *models.Job, user, base string, heldAfter float64) Message {
	base = strings.TrimRight(base, "/")
	m := Message{Event: n.Event, At: n.At, Detail: n.Detail, User: user, URL: base + "/"}
	if n.Event == models.EventTest || j == nil {
		m.Subject = "[gpuportal] test notification"
		m.Text = fmt.Sprintf("This is a test notification from gpuportal for %s: notifications reach you here. Settings: %s/notifications", user, base)
		if n.Event != models.EventTest {
			m.Subject = fmt.Sprintf("[gpuportal] job %d %s", n.JobID, n.Event)
			m.Text = fmt.Sprintf("Job %d %s (the job is gone). %s", n.JobID, what(n.Event, n.Detail, heldAfter), m.URL)
		}
		return m
	}
	m.URL = fmt.Sprintf("%s/jobs/%d", base, j.ID)
	info := &JobInfo{ID: j.ID, Name: j.Name, User: j.User, Team: j.Team, GPUs: j.GPUs, State: string(j.State), URL: m.URL}
	if n.Event == models.EventSucceeded || n.Event == models.EventFailed || n.Event == models.EventTimedOut {
		info.ExitCode = j.ExitCode
	}
	m.Job = info
	short := what(n.Event, "", heldAfter)
	m.Subject = fmt.Sprintf("[gpuportal] job %d (%s) %s", j.ID, oneLine(j.Name, 80), short)
	text := fmt.Sprintf("Job %d (%s) of %s %s", j.ID, j.Name, j.User, what(n.Event, n.Detail, heldAfter))
	if info.ExitCode != nil && !strings.Contains(n.Detail, "exit code") {
		text += fmt.Sprintf(" (exit code %d)", *info.ExitCode)
	}
	m.Text = oneLine(text, 1000) + ". " + m.URL
	return m
}

// oneLine flattens s to one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		for n > 0 && s[n]&0xC0 == 0x80 {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

// Email is the message's plain-text body.
func (m Message) Email() string {
	var b strings.Builder
	b.WriteString(m.Text + "\n\n")
	if j := m.Job; j != nil {
		fmt.Fprintf(&b, "Job:    %d %s\n", j.ID, j.Name)
		fmt.Fprintf(&b, "Owner:  %s (team %s)\n", j.User, j.Team)
		fmt.Fprintf(&b, "GPUs:   %d\n", j.GPUs)
		fmt.Fprintf(&b, "State:  %s\n", j.State)
		if j.ExitCode != nil {
			fmt.Fprintf(&b, "Exit:   %d\n", *j.ExitCode)
		}
	}
	fmt.Fprintf(&b, "Event:  %s at %s\n", m.Event, m.At.UTC().Format(time.RFC3339))
	if m.Detail != "" {
		fmt.Fprintf(&b, "Detail: %s\n", m.Detail)
	}
	fmt.Fprintf(&b, "\n%s\n\n-- \nYou get this because of your notification settings: %s\n", m.URL, settingsURL(m.URL))
	return b.String()
}

func settingsURL(u string) string {
	if i := strings.Index(u, "/jobs/"); i >= 0 {
		return u[:i] + "/notifications"
	}
	return strings.TrimRight(u, "/") + "/notifications"
}

// Payload is the JSON body of a webhook request: Slack's and
// Mattermost's incoming webhooks show Text and Attachments; the other
// fields are for programs.
type Payload struct {
	Text        string       `json:"text"`
	Username    string       `json:"username"`
	Attachments []Attachment `json:"attachments"`
	Event       string       `json:"event"`
	At          time.Time    `json:"at"`
	Detail      string       `json:"detail"`
	User        string       `json:"user"`
	URL         string       `json:"url"`
	Job         *JobInfo     `json:"job"`
}

// Attachment is a Slack (and Mattermost) message attachment.
type Attachment struct {
	Fallback  string  `json:"fallback"`
	Color     string  `json:"color"`
	Title     string  `json:"title"`
	TitleLink string  `json:"title_link"`
	Text      string  `json:"text,omitempty"`
	Fields    []Field `json:"fields"`
	TS        int64   `json:"ts"`
}

// Field is one short fact of an attachment.
type Field struct {
	Title string `json:"title"`
	Value string `json:"value"`
	Short bool   `json:"short"`
}

// colors of the events' attachments.
var colors = map[string]string{
	models.EventStarted: "#2f6fde", models.EventSucceeded: "#2e9e4f", models.EventFailed: "#d0342c",
	models.EventPreempted: "#e0a800", models.EventTimedOut: "#d0342c", models.EventCancelled: "#7a7a7a",
	models.EventHeld: "#e0a800", models.EventIdle: "#e0a800", models.EventReclaimed: "#d0342c", models.EventTest: "#2f6fde",
}

// Payload is the message as a webhook's JSON body.
func (m Message) Payload() Payload {
	p := Payload{Text: m.Text, Username: "gpuportal", Event: m.Event, At: m.At.UTC(), Detail: m.Detail,
		User: m.User, URL: m.URL, Job: m.Job}
	a := Attachment{Fallback: m.Text, Color: colors[m.Event], Title: m.Subject, TitleLink: m.URL, Text: m.Detail, TS: m.At.Unix(),
		Fields: []Field{{Title: "Event", Value: m.Event, Short: true}}}
	if j := m.Job; j != nil {
		a.Title = fmt.Sprintf("Job %d: %s", j.ID, j.Name)
		a.Fields = append(a.Fields, Field{Title: "State", Value: j.State, Short: true},
			Field{Title: "Owner", Value: j.User, Short: true}, Field{Title: "Team", Value: j.Team, Short: true},
			Field{Title: "GPUs", Value: strconv.Itoa(j.GPUs), Short: true})
		if j.ExitCode != nil {
			a.Fields = append(a.Fields, Field{Title: "Exit code", Value: strconv.Itoa(*j.ExitCode), Short: true})
		}
	}
	p.Attachments = []Attachment{a}
	return p
}
