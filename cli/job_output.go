package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
)

// How the client commands print what the server answers: -o json and -o
// yaml print the API's objects as the REST API returns them; -o wide a
// table with more columns; -o name one job/ID per line; --parsable (list
// commands) fields separated by "|", as sacct --parsable2 and squeue
// --format print them.

// parsableSep separates the fields of --parsable output.
const parsableSep = "|"

// listFlags are the flags of list commands besides -o.
type listFlags struct {
	noHeaders bool
}

func (l *listFlags) register(f *jobFlags) {
	f.fs.BoolVar(&f.parsable, "parsable", false, "print every column, separated by "+parsableSep+", with times in RFC 3339 (as sacct --parsable2)")
	f.fs.BoolVar(&l.noHeaders, "no-headers", false, "leave out the header line of a table or of --parsable")
}

// jobColumn is a column of a job table.
type jobColumn struct {
	header string
	// cell is the column in the table; full, where set, the whole value
	// that cell shortens, for -o wide and --parsable; raw, where set, the
	// value for --parsable (times in RFC 3339, none as nothing).
	cell func(c jobCmd, j api.Job) string
	full func(c jobCmd, j api.Job) string
	raw  func(j api.Job) string
	// wide columns show only with -o wide and --parsable.
	wide bool
}

// jobListColumns are the columns of gpuportal job list.
var jobListColumns = []jobColumn{
	{header: "ID", cell: func(_ jobCmd, j api.Job) string { return strconv.FormatInt(j.ID, 10) }},
	{header: "NAME", cell: func(_ jobCmd, j api.Job) string { return cell(j.Name, 40) }, full: func(_ jobCmd, j api.Job) string { return oneLine(j.Name) }},
	{header: "USER", cell: func(_ jobCmd, j api.Job) string { return j.User }},
	{header: "TEAM", cell: func(_ jobCmd, j api.Job) string { return j.Team }},
	{header: "GPUS", cell: func(_ jobCmd, j api.Job) string { return strconv.Itoa(j.GPUs) }},
	{header: "STATE", cell: func(_ jobCmd, j api.Job) string { return string(j.State) }},
	{header: "QUEUE", cell: func(_ jobCmd, j api.Job) string { return strconv.Itoa(j.Queue) }},
	{header: "SUBMITTED", cell: func(c jobCmd, j api.Job) string { return c.ago(j.SubmittedAt) }, raw: func(j api.Job) string { return rfc3339(&j.SubmittedAt) }},
	{header: "STARTED", wide: true, cell: func(c jobCmd, j api.Job) string { return agoPtr(c, j.StartedAt) }, raw: func(j api.Job) string { return rfc3339(j.StartedAt) }},
	{header: "FINISHED", wide: true, cell: func(c jobCmd, j api.Job) string { return agoPtr(c, j.FinishedAt) }, raw: func(j api.Job) string { return rfc3339(j.FinishedAt) }},
	{header: "EXIT_CODE", wide: true, cell: func(_ jobCmd, j api.Job) string { return exitCodeText(j.ExitCode, "-") }, raw: func(j api.Job) string { return exitCodeText(j.ExitCode, "") }},
	{header: "PLACEMENT", wide: true, cell: func(_ jobCmd, j api.Job) string { return orDash(strings.Join(j.Placement, ",")) }, raw: func(j api.Job) string { return strings.Join(j.Placement, ",") }},
	{header: "REASON", cell: func(_ jobCmd, j api.Job) string { return cell(j.Reason, 60) }, full: func(_ jobCmd, j api.Job) string { return oneLine(j.Reason) }},
}

// jobStartColumns are the columns of gpuportal job list --start.
var jobStartColumns = []jobColumn{
	{header: "ID", cell: func(_ jobCmd, j api.Job) string { return strconv.FormatInt(j.ID, 10) }},
	{header: "NAME", cell: func(_ jobCmd, j api.Job) string { return cell(j.Name, 30) }, full: func(_ jobCmd, j api.Job) string { return oneLine(j.Name) }},
	{header: "USER", cell: func(_ jobCmd, j api.Job) string { return j.User }},
	{header: "TEAM", cell: func(_ jobCmd, j api.Job) string { return j.Team }},
	{header: "GPUS", cell: func(_ jobCmd, j api.Job) string { return strconv.Itoa(j.GPUs) }},
	{header: "STATE", cell: func(_ jobCmd, j api.Job) string { return string(j.State) }},
	{header: "START", cell: func(c jobCmd, j api.Job) string { return j.Forecast.Short(c.now(), time.Local) }},
	{header: "EARLIEST", wide: true, cell: func(_ jobCmd, j api.Job) string { return clock(forecastTime(j, earliest)) }, raw: func(j api.Job) string { return rfc3339(forecastTime(j, earliest)) }},
	{header: "LIKELY", cell: func(_ jobCmd, j api.Job) string { return clock(forecastTime(j, likely)) }, raw: func(j api.Job) string { return rfc3339(forecastTime(j, likely)) }},
	{header: "LATEST", wide: true, cell: func(_ jobCmd, j api.Job) string { return clock(forecastTime(j, latest)) }, raw: func(j api.Job) string { return rfc3339(forecastTime(j, latest)) }},
	{header: "FORECAST", cell: func(c jobCmd, j api.Job) string { return cell(j.Forecast.Text(c.now(), time.Local), 90) }, full: func(c jobCmd, j api.Job) string { return oneLine(j.Forecast.Text(c.now(), time.Local)) }},
}

type forecastBound int

const (
	earliest forecastBound = iota
	likely
	latest
)

func forecastTime(j api.Job, b forecastBound) *time.Time {
	f := j.Forecast
	if f == nil {
		return nil
	}
	return [...]*time.Time{f.Earliest, f.Likely, f.Latest}[b]
}

func clock(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format("15:04:05")
}

func rfc3339(t *time.Time) string {
	if t == nil || t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func agoPtr(c jobCmd, t *time.Time) string {
	if t == nil {
		return "-"
	}
	return c.ago(*t)
}

func exitCodeText(code *int, none string) string {
	if code == nil {
		return none
	}
	return strconv.Itoa(*code)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeJobs prints a list of jobs: raw is the server's JSON of them (what
// -o json prints), empty what the table says when there is none.
func (c jobCmd) writeJobs(jobs []api.Job, raw []byte, f *jobFlags, lf listFlags, cols []jobColumn, empty string) error {
	return c.emit(f, raw, jobNames(jobs...), func(wide bool) error {
		if f.parsable {
			return c.writeParsable(jobs, lf, cols)
		}
		return c.writeTable(jobs, lf, cols, wide, empty)
	})
}

// writeParsable prints jobs with every column, separated by "|".
func (c jobCmd) writeParsable(jobs []api.Job, lf listFlags, cols []jobColumn) error {
	var b strings.Builder
	if !lf.noHeaders {
		hs := make([]string, len(cols))
		for i, col := range cols {
			hs[i] = col.header
		}
		b.WriteString(strings.Join(hs, parsableSep) + "\n")
	}
	for _, j := range jobs {
		fs := make([]string, len(cols))
		for i, col := range cols {
			switch {
			case col.raw != nil:
				fs[i] = col.raw(j)
			case col.full != nil:
				fs[i] = col.full(c, j)
			default:
				fs[i] = col.cell(c, j)
			}
		}
		b.WriteString(strings.Join(fs, parsableSep) + "\n")
	}
	_, err := io.WriteString(c.stdout, b.String())
	return err
}

// writeTable prints jobs as a table, with the wide columns if asked.
func (c jobCmd) writeTable(jobs []api.Job, lf listFlags, cols []jobColumn, wide bool, empty string) error {
	if len(jobs) == 0 {
		if !lf.noHeaders {
			fmt.Fprintln(c.stdout, empty)
		}
		return nil
	}
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	var shown []jobColumn
	for _, col := range cols {
		if wide || !col.wide {
			shown = append(shown, col)
		}
	}
	if !lf.noHeaders {
		hs := make([]string, len(shown))
		for i, col := range shown {
			hs[i] = col.header
		}
		fmt.Fprintln(w, strings.Join(hs, "\t"))
	}
	for _, j := range jobs {
		fs := make([]string, len(shown))
		for i, col := range shown {
			if wide && col.full != nil {
				fs[i] = col.full(c, j)
			} else {
				fs[i] = col.cell(c, j)
			}
		}
		fmt.Fprintln(w, strings.Join(fs, "\t"))
	}
	return w.Flush()
}

// emit prints what a command got from the server as -o asks, the one
// place every client command's output goes through: json and yaml print
// raw, the API's JSON as the server sent it; name prints names, one a
// line (job/12), and is refused, naming -o, by a command whose answer
// has none (names nil); the table, and -o wide, are human's (wide: with
// more columns where the command has them).
func (c jobCmd) emit(f *jobFlags, raw []byte, names []string, human func(wide bool) error) error {
	format, err := f.format()
	if err != nil {
		return err
	}
	switch format {
	case "json":
		return printJSON(c.stdout, raw)
	case "yaml":
		return writeYAML(c.stdout, raw)
	case "name":
		if names == nil {
			return fmt.Errorf("-o name: %s names no objects; want json, yaml or wide", f.name())
		}
		for _, n := range names {
			if _, err := fmt.Fprintln(c.stdout, n); err != nil {
				return err
			}
		}
		return nil
	}
	return human(format == "wide")
}

// jobNames are the -o name lines of jobs.
func jobNames(jobs ...api.Job) []string {
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = fmt.Sprintf("job/%d", j.ID)
	}
	return names
}

// writeYAML prints JSON as YAML, keys in the JSON's order, so that -o
// yaml shows the same fields and values as -o json.
func writeYAML(w io.Writer, raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := yamlNode(dec)
	if err != nil {
		return fmt.Errorf("the server's answer is not JSON: %w", err)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return fmt.Errorf("write YAML: %w", err)
	}
	return enc.Close()
}

// yamlNode reads one JSON value from dec as a YAML node.
func yamlNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := k.(string)
				if !ok {
					return nil, fmt.Errorf("object key %v is not a string", k)
				}
				val, err := yamlNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, val)
			}
			_, err := dec.Token() // }
			return n, err
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for dec.More() {
				val, err := yamlNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, val)
			}
			_, err := dec.Token() // ]
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", v)
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(v.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// Exit codes of commands that wait for a job (job submit --wait, job logs
// --follow): they say how the job ended. Any other failure of gpuportal
// (a bad flag, no token, a server that refuses or cannot be reached)
// exits 1.
const (
	exitJobFailed    = 3
	exitJobCancelled = 4
	exitJobTimedOut  = 5
	// exitInterrupted: the wait was interrupted (Ctrl-C) before the job
	// ended, as a shell reports a command ended by SIGINT.
	exitInterrupted = 130
)

// exitStatus is an error that sets gpuportal's exit code; main prints
// its message, unless empty, as it prints other errors.
type exitStatus struct {
	code int
	msg  string
}

func (e *exitStatus) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("exit code %d", e.code)
	}
	return e.msg
}

// exitCodeOf is the exit code for a job that ended in state.
func exitCodeOf(state string) int {
	switch state {
	case "succeeded":
		return 0
	case "cancelled":
		return exitJobCancelled
	case "timed_out":
		return exitJobTimedOut
	}
	return exitJobFailed
}

// jobEnded says on stderr how a job ended and returns the exit status
// that says it to a script: nil when it succeeded.
func (c jobCmd) jobEnded(j api.Job) error {
	msg := fmt.Sprintf("job %d %s", j.ID, j.State)
	if j.ExitCode != nil {
		msg += fmt.Sprintf(" (exit code %d)", *j.ExitCode)
	}
	return c.ended(msg, j.State)
}

// ended says msg on stderr and returns the exit status that says state
// to a script: nil for success.
func (c jobCmd) ended(msg string, state job.State) error {
	fmt.Fprintln(c.stderr, "gpuportal:", msg)
	if code := exitCodeOf(string(state)); code != 0 {
		return &exitStatus{code: code}
	}
	return nil
}

// interrupted is the exit status of a wait cut short, saying that the job
// goes on.
func (c jobCmd) interrupted(id int64) error {
	return c.stoppedWaiting(fmt.Sprintf("job %d goes on (gpuportal job cancel %d stops it)", id, id))
}

// arrayInterrupted is interrupted for a wait on every task of array id:
// job cancel of the array's ID would stop its first task alone.
func (c jobCmd) arrayInterrupted(id int64) error {
	return c.stoppedWaiting(fmt.Sprintf("array %d goes on (gpuportal scancel %d stops every task of it)", id, id))
}

// stoppedWaiting says that a wait was cut short and what goes on.
func (c jobCmd) stoppedWaiting(what string) error {
	fmt.Fprintln(c.stderr, "gpuportal: stopped waiting; "+what)
	return &exitStatus{code: exitInterrupted}
}

// isExitStatus reports whether err carries an exit code of its own.
func isExitStatus(err error) (*exitStatus, bool) {
	var es *exitStatus
	ok := errors.As(err, &es)
	return es, ok
}
