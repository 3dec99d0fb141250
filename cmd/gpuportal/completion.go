package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/client"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/sched"
)

// Shell completion: the scripts that "gpuportal completion SHELL" prints
// are thin; each asks the binary itself, as "gpuportal __complete WORD...
// CURRENT", for the candidates of the word being typed. The candidates
// come from the command table below and from the commands' own flag sets,
// so that they never drift from what the commands accept; job IDs come
// from the server.

// completeCommand is the hidden command the completion scripts call.
const completeCommand = "__complete"

// completeFiles, printed on a line of its own, asks the shell to complete
// file names.
const completeFiles = ":files"

// completionTimeout bounds what completion asks the server.
const completionTimeout = 3 * time.Second

// candidate is one completion: a word and what it is.
type candidate struct{ value, desc string }

// cmdSpec is a command of the table: its subcommands, flags and
// arguments.
type cmdSpec struct {
	name, summary string
	subs          []cmdSpec
	// flags reads the command's flag set; nil: none.
	flags func(c jobCmd) []*flag.Flag
	// args completes its positional arguments; nil: none.
	args func(ctx context.Context, c jobCmd, f *jobFlags) []candidate
	// outputs are the values of its -o.
	outputs []string
}

// commandTable is gpuportal's commands, as completion knows them.
func commandTable() cmdSpec {
	jobSub := func(name, summary string, args func(context.Context, jobCmd, *jobFlags) []candidate) cmdSpec {
		return cmdSpec{name: name, summary: summary, args: args, outputs: []string{"json", "yaml", "wide", "name"},
			flags: func(c jobCmd) []*flag.Flag {
				return inspectFlags(c, func(c jobCmd) error { return c.run(context.Background(), []string{name}) })
			}}
	}
	notifySub := func(name, summary string) cmdSpec {
		return cmdSpec{name: name, summary: summary, outputs: []string{"json", "yaml"},
			flags: func(c jobCmd) []*flag.Flag {
				return inspectFlags(c, func(c jobCmd) error { return notifyCmd{jobCmd: c}.run(context.Background(), []string{name}) })
			}}
	}
	sessionSub := func(name, summary string, args func(context.Context, jobCmd, *jobFlags) []candidate) cmdSpec {
		return cmdSpec{name: name, summary: summary, args: args, outputs: []string{"json", "yaml", "name"},
			flags: func(c jobCmd) []*flag.Flag {
				return inspectFlags(c, func(c jobCmd) error { return c.session(context.Background(), []string{name}) })
			}}
	}
	configSub := func(name, summary string, args func(context.Context, jobCmd, *jobFlags) []candidate) cmdSpec {
		return cmdSpec{name: name, summary: summary, args: args, outputs: []string{"name"},
			flags: func(c jobCmd) []*flag.Flag {
				return inspectFlags(c, func(c jobCmd) error { return c.runConfig([]string{name}) })
			}}
	}
	contexts := func(_ context.Context, c jobCmd, _ *jobFlags) []candidate {
		return words(c.contextNamesFor(), "context")
	}
	adminSubs := []cmdSpec{}
	for _, a := range adminCommands() {
		spec := cmdSpec{name: a.name, summary: a.summary}
		if a.run != nil {
			spec.flags = func(jobCmd) []*flag.Flag {
				var buf bytes.Buffer
				_ = a.run(adminCmd{stdout: io.Discard, stderr: &buf}, context.Background(), []string{"-h"})
				return flagsFromHelp(buf.String())
			}
		}
		adminSubs = append(adminSubs, spec)
	}
	return cmdSpec{
		name: "gpuportal",
		flags: func(jobCmd) []*flag.Flag {
			return []*flag.Flag{{Name: "version", Usage: "print this build's version", Value: boolValue{}}}
		},
		subs: []cmdSpec{
			{name: "serve", summary: "run the portal, the API and the scheduler", flags: func(jobCmd) []*flag.Flag {
				return helpFlags(func(w io.Writer) error { _, err := parseServeFlags([]string{"-h"}, w); return err }, true)
			}},
			{name: "agent", summary: "run jobs on this machine for a remote server", flags: func(jobCmd) []*flag.Flag {
				return helpFlags(func(w io.Writer) error { _, err := parseAgentFlags([]string{"-h"}, w); return err }, true)
			}},
			{name: "admin", summary: "manage users, teams and tokens in the database", subs: adminSubs, flags: func(jobCmd) []*flag.Flag {
				return []*flag.Flag{
					{Name: "data", Usage: "data folder of the SQLite database", Value: &stringValue{}},
					{Name: "db", Usage: "database: sqlite:PATH or a postgres:// URL", Value: &stringValue{}},
				}
			}},
			{name: "sim", summary: "replay a cluster trace under several policies", flags: func(jobCmd) []*flag.Flag {
				return helpFlags(func(w io.Writer) error { return runSim(context.Background(), []string{"-h"}, io.Discard, w) }, false)
			}},
			{name: "job", summary: "submit, list, show, cancel jobs and read their logs", subs: []cmdSpec{
				jobSub("submit", "submit a job", nil),
				jobSub("list", "list jobs", nil),
				jobSub("get", "list jobs, or get jobs by ID (--watch: and their changes)", jobIDs(false)),
				jobSub("show", "show a job and its history", jobIDs(false)),
				jobSub("describe", "show a job and its history (as show)", jobIDs(false)),
				jobSub("cancel", "cancel jobs", jobIDs(true)),
				jobSub("logs", "print a job's output", jobIDs(false)),
			}},
			{name: "notify", summary: "show and set your notifications (email, webhook)", subs: []cmdSpec{
				notifySub("show", "your settings and the latest notifications"),
				notifySub("set", "change your settings"),
				notifySub("test", "send a test notification by each channel"),
			}},
			{name: "session", summary: "start Jupyter, a terminal or a web app on GPUs", subs: []cmdSpec{
				sessionSub("start", "start a session", nil),
				sessionSub("open", "print a session's address", jobIDs(false)),
				sessionSub("stop", "end sessions", jobIDs(true)),
				sessionSub("keep-alive", "keep an idle session from being stopped for N hours", jobIDs(false)),
			}},
			{name: "login", summary: "log in to a server and save it as a context",
				flags: func(c jobCmd) []*flag.Flag {
					return inspectFlags(c, func(c jobCmd) error { return c.login(context.Background(), nil) })
				}},
			{name: "logout", summary: "forget the token of a context",
				flags: func(c jobCmd) []*flag.Flag {
					return inspectFlags(c, func(c jobCmd) error { return c.logout(context.Background(), nil) })
				}},
			{name: "config", summary: "list and switch contexts", subs: []cmdSpec{
				configSub("get-contexts", "the saved contexts", nil),
				configSub("current-context", "the current context's name", nil),
				configSub("use-context", "make a context the current one", contexts),
				configSub("delete-context", "forget a context and its token", contexts),
			}},
			{name: "version", summary: "print the client's and the server's versions", outputs: []string{"json", "yaml"},
				flags: func(c jobCmd) []*flag.Flag {
					return inspectFlags(c, func(c jobCmd) error { return c.version(context.Background(), nil) })
				}},
			{name: "completion", summary: "print a shell's completion script",
				args: func(context.Context, jobCmd, *jobFlags) []candidate { return words(completionShells, "shell") }},
			{name: "help", summary: "show the commands"},
		},
	}
}

// adminCommand is a subcommand of gpuportal admin; run parses its flags
// first (nil: it has none).
type adminCommand struct {
	name, summary string
	run           func(a adminCmd, ctx context.Context, args []string) error
}

// adminCommands lists gpuportal admin's commands, for completion.
func adminCommands() []adminCommand {
	change := func(cmd string) func(adminCmd, context.Context, []string) error {
		return func(a adminCmd, ctx context.Context, args []string) error { return a.changeUser(ctx, cmd, args) }
	}
	return []adminCommand{
		{"create-team", "create a team", adminCmd.createTeam},
		{"create-user", "create a user", adminCmd.createUser},
		{"reset-password", "set a user's password", adminCmd.resetPassword},
		{"set-role", "set a user's role and team", adminCmd.setRole},
		{"create-token", "create an API token", adminCmd.createToken},
		{"list-users", "list the users", nil},
		{"list-tokens", "a user's API tokens", adminCmd.listTokens},
		{"revoke-token", "revoke an API token", adminCmd.revokeToken},
		{"disable-user", "disable an account", change("disable-user")},
		{"enable-user", "enable an account", change("enable-user")},
		{"delete-user", "delete an account", change("delete-user")},
		{"audit", "the audit log", adminCmd.audit},
		{"create-join-token", "let agents join new machines", adminCmd.createJoinToken},
		{"list-join-tokens", "list the join tokens", nil},
		{"revoke-join-token", "revoke a join token", adminCmd.revokeJoinToken},
		{"list-machines", "list the machines", nil},
		{"remove-machine", "forget a machine", adminCmd.removeMachine},
	}
}

// inspectFlags returns the flags that run's command defines, reading its
// flag set instead of running it (jobCmd.inspect).
func inspectFlags(c jobCmd, run func(c jobCmd) error) []*flag.Flag {
	var got []*flag.Flag
	c.inspect = func(fs *flag.FlagSet) {
		fs.VisitAll(func(f *flag.Flag) { got = append(got, f) })
	}
	c.stdout, c.stderr = io.Discard, io.Discard
	_ = run(c)
	return got
}

// helpFlags returns the flags a command lists when asked for help
// (flag.FlagSet.PrintDefaults' format): for the commands whose flag sets
// are local to them. wantHelp: the command returns flag.ErrHelp.
func helpFlags(help func(w io.Writer) error, wantHelp bool) []*flag.Flag {
	var buf bytes.Buffer
	err := help(&buf)
	if wantHelp && !errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return flagsFromHelp(buf.String())
}

// flagsFromHelp reads PrintDefaults' lines: "  -name type" (or "  -name"
// for a boolean flag) followed by a tab-indented usage.
func flagsFromHelp(help string) []*flag.Flag {
	var out []*flag.Flag
	for _, line := range strings.Split(help, "\n") {
		rest, ok := strings.CutPrefix(line, "  -")
		if !ok {
			if u, ok := strings.CutPrefix(line, "    \t"); ok && len(out) > 0 {
				out[len(out)-1].Usage = strings.TrimSpace(out[len(out)-1].Usage + " " + u)
			}
			continue
		}
		head, usage, _ := strings.Cut(rest, "\t")
		fields := strings.Fields(head)
		if len(fields) == 0 {
			continue
		}
		f := &flag.Flag{Name: fields[0], Usage: strings.TrimSpace(usage), Value: boolValue{}}
		if len(fields) > 1 {
			f.Value = &stringValue{}
		}
		out = append(out, f)
	}
	return out
}

// boolValue and stringValue stand for flags read from help text.
type boolValue struct{}

func (boolValue) String() string   { return "" }
func (boolValue) Set(string) error { return nil }
func (boolValue) IsBoolFlag() bool { return true }

type stringValue struct{ s string }

func (v *stringValue) String() string     { return v.s }
func (v *stringValue) Set(s string) error { v.s = s; return nil }

// takesValue reports whether a flag needs a value (is not boolean).
func takesValue(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// complete prints the candidates for the last of words, the words typed
// after "gpuportal" (the last one, being typed, may be empty): one per
// line, "value<TAB>description", and completeFiles where the shell should
// complete file names.
func (c jobCmd) complete(ctx context.Context, words []string) error {
	cands, files := c.candidates(ctx, words)
	var b strings.Builder
	for _, cd := range cands {
		b.WriteString(cd.value)
		if cd.desc != "" {
			b.WriteString("\t" + oneLine(cd.desc))
		}
		b.WriteByte('\n')
	}
	if files {
		b.WriteString(completeFiles + "\n")
	}
	_, err := io.WriteString(c.stdout, b.String())
	return err
}

// candidates computes the completions of the last of words.
func (c jobCmd) candidates(ctx context.Context, words []string) (cands []candidate, files bool) {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, before := words[len(words)-1], words[:len(words)-1]
	node := commandTable()
	var flags []*flag.Flag
	flagsOf := func() []*flag.Flag {
		if flags == nil && node.flags != nil {
			flags = node.flags(c)
		}
		return flags
	}
	// What the words typed so far say: the command, the flags that
	// matter to completion (--server, --context), and whether a flag
	// waits for its value.
	seen := &jobFlags{}
	var pending *flag.Flag
	positional := 0
	for i := 0; i < len(before); i++ {
		w := before[i]
		if pending != nil {
			if w == "=" { // bash splits --flag=value at "="
				continue
			}
			setSeen(seen, pending.Name, w)
			pending = nil
			continue
		}
		switch {
		case w == "--":
			// The job's own command follows: its words are files and
			// programs.
			return nil, true
		case strings.HasPrefix(w, "-") && w != "-":
			name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
			f := findFlag(flagsOf(), name)
			if f == nil {
				continue
			}
			switch {
			case hasValue:
				setSeen(seen, name, value)
			case takesValue(f):
				pending = f
			}
		case positional == 0 && findSub(node, w) != nil:
			node, flags = *findSub(node, w), nil
		default:
			positional++
		}
	}
	if pending != nil {
		if cur == "=" {
			cur = ""
		}
		vals, files := c.flagValues(node, pending)
		return filterPrefix(vals, cur), files
	}
	if strings.HasPrefix(cur, "-") {
		if name, _, ok := strings.Cut(cur, "="); ok {
			f := findFlag(flagsOf(), strings.TrimLeft(name, "-"))
			if f == nil || !takesValue(f) {
				return nil, false
			}
			vals, files := c.flagValues(node, f)
			for i := range vals {
				vals[i].value = name + "=" + vals[i].value
			}
			return filterPrefix(vals, cur), files
		}
		var out []candidate
		for _, f := range flagsOf() {
			dash := "--"
			if len(f.Name) == 1 {
				dash = "-"
			}
			out = append(out, candidate{dash + f.Name, f.Usage})
		}
		sort.Slice(out, func(a, b int) bool { return out[a].value < out[b].value })
		return filterPrefix(out, cur), false
	}
	if len(node.subs) > 0 && positional == 0 {
		var out []candidate
		for _, s := range node.subs {
			out = append(out, candidate{s.name, s.summary})
		}
		return filterPrefix(out, cur), false
	}
	if node.args != nil {
		return filterPrefix(node.args(ctx, c, seen), cur), false
	}
	return nil, false
}

// filterPrefix keeps the candidates that start with prefix.
func filterPrefix(cands []candidate, prefix string) []candidate {
	var out []candidate
	for _, cd := range cands {
		if strings.HasPrefix(cd.value, prefix) {
			out = append(out, cd)
		}
	}
	return out
}

func findSub(node cmdSpec, name string) *cmdSpec {
	for i := range node.subs {
		if node.subs[i].name == name {
			return &node.subs[i]
		}
	}
	return nil
}

func findFlag(flags []*flag.Flag, name string) *flag.Flag {
	for _, f := range flags {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// setSeen notes the flags that decide which server completion asks.
func setSeen(f *jobFlags, name, value string) {
	switch name {
	case "server":
		f.server = value
	case "context":
		f.context = value
	}
}

// flagValues are the values flag f of command node takes, where they are
// few; files: the value is a file or folder name.
func (c jobCmd) flagValues(node cmdSpec, f *flag.Flag) ([]candidate, bool) {
	switch f.Name {
	case "o", "output":
		return words(node.outputs, "output format"), false
	case "context":
		return words(c.contextNamesFor(), "context"), false
	case "scope":
		return []candidate{{"mine", "your jobs"}, {"team", "your team's jobs"}, {"all", "every job (admins)"}}, false
	case "state":
		states := make([]string, len(job.States))
		for i, s := range job.States {
			states[i] = string(s)
		}
		return words(states, "job state"), false
	case "policy":
		return words(sched.Policies(), "scheduling policy"), false
	case "log-level":
		return words([]string{"debug", "info", "warn", "error"}, "log level"), false
	case "executor":
		return words([]string{"agents", "slurm"}, "executor"), false
	case "role":
		return words([]string{"researcher", "lead", "admin"}, "role"), false
	}
	u := strings.ToLower(f.Usage)
	return nil, strings.Contains(u, "file") || strings.Contains(u, "folder")
}

// words are candidates with one description.
func words(values []string, desc string) []candidate {
	out := make([]candidate, len(values))
	for i, v := range values {
		out[i] = candidate{v, desc}
	}
	return out
}

// jobIDs completes job IDs with the user's jobs on the server the words
// typed so far name, newest first; live: only jobs that have not ended
// (to cancel).
func jobIDs(live bool) func(context.Context, jobCmd, *jobFlags) []candidate {
	return func(ctx context.Context, c jobCmd, f *jobFlags) []candidate {
		t, err := c.target(f)
		if err != nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, completionTimeout)
		defer cancel()
		cl, err := client.New(t.server.String(), t.token, client.WithHTTPClient(c.http), client.WithUserAgent("gpuportal-cli"))
		if err != nil {
			return nil
		}
		p, err := cl.Jobs(ctx, client.JobQuery{Scope: "mine", Limit: 200})
		if err != nil {
			return nil
		}
		var out []candidate
		for _, j := range p.Jobs {
			if live && j.State.Final() {
				continue
			}
			out = append(out, candidate{strconv.FormatInt(j.ID, 10), fmt.Sprintf("%s (%s)", cell(j.Name, 40), j.State)})
		}
		return out
	}
}

// completionShells are the shells gpuportal completion writes for.
var completionShells = []string{"bash", "zsh", "fish"}

const completionUsage = `Usage: gpuportal completion bash|zsh|fish

Prints the shell's completion script for gpuportal: commands, flags, flag
values, contexts, and the IDs of your jobs (asked of the server).

  bash:  source <(gpuportal completion bash)            # in ~/.bashrc
  zsh:   gpuportal completion zsh > "${fpath[1]}/_gpuportal"
         (or: source <(gpuportal completion zsh) in ~/.zshrc, after compinit)
  fish:  gpuportal completion fish > ~/.config/fish/completions/gpuportal.fish
`

// runCompletion is "gpuportal completion SHELL".
func runCompletion(args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 {
		switch args[0] {
		case "bash":
			_, err := io.WriteString(stdout, bashCompletion)
			return err
		case "zsh":
			_, err := io.WriteString(stdout, zshCompletion)
			return err
		case "fish":
			_, err := io.WriteString(stdout, fishCompletion)
			return err
		case "-h", "--help", "help":
			_, err := io.WriteString(stdout, completionUsage)
			return err
		}
	}
	fmt.Fprint(stderr, completionUsage)
	if len(args) == 0 {
		return errors.New("completion: name a shell: bash, zsh or fish")
	}
	if len(args) > 1 {
		return fmt.Errorf("completion: want one shell, got %d arguments", len(args))
	}
	return fmt.Errorf("completion: unknown shell %q: want bash, zsh or fish", args[0])
}

const bashCompletion = `# bash completion for gpuportal: source <(gpuportal completion bash)
_gpuportal() {
    local cur="${COMP_WORDS[COMP_CWORD]}" line files=0
    local -a cands=()
    local IFS=$'\n'
    for line in $("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null); do
        if [[ $line == ":files" ]]; then
            files=1
        else
            cands+=("${line%%$'\t'*}")
        fi
    done
    if (( ${#cands[@]} == 0 && files )); then
        compopt -o default 2>/dev/null
        COMPREPLY=()
        return
    fi
    if [[ $cur == "=" ]]; then
        # bash made "--flag=" two words: the value replaces the "=".
        cands=("${cands[@]/#/=}")
    fi
    COMPREPLY=("${cands[@]}")
}
complete -o nosort -F _gpuportal gpuportal 2>/dev/null || complete -F _gpuportal gpuportal
`

const zshCompletion = `#compdef gpuportal
# zsh completion for gpuportal: gpuportal completion zsh > "${fpath[1]}/_gpuportal"
_gpuportal() {
    local -a lines cands
    local line files=0
    lines=("${(@f)$(${words[1]} __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
    for line in "${lines[@]}"; do
        [[ -z $line ]] && continue
        if [[ $line == ":files" ]]; then
            files=1
            continue
        fi
        local value=${line%%$'\t'*} desc=""
        [[ $line == *$'\t'* ]] && desc=${line#*$'\t'}
        cands+=("${value//:/\\:}:${desc}")
    done
    if (( ${#cands} == 0 && files )); then
        _files
        return
    fi
    (( ${#cands} )) && _describe gpuportal cands
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _gpuportal "$@"
else
    compdef _gpuportal gpuportal
fi
`

const fishCompletion = `# fish completion for gpuportal: gpuportal completion fish > ~/.config/fish/completions/gpuportal.fish
function __gpuportal_complete
    set -l words (commandline -opc)
    set -l cmd $words[1]
    set -e words[1]
    set -l cur (commandline -ct)
    set -l out (command $cmd __complete $words "$cur" 2>/dev/null)
    for line in $out
        if test "$line" = ":files"
            if test (count $out) -eq 1
                __fish_complete_path "$cur"
            end
        else
            echo $line
        end
    end
end
complete -c gpuportal -f -a '(__gpuportal_complete)'
`
