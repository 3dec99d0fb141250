// Package sbatch reads Slurm batch scripts as sbatch does: the #SBATCH
// directives at their top and sbatch's own command-line options, into what
// a gpuportal submission needs (docs/slurm.md, "Scripts"). It says which
// directives it does not act on, and names the line and directive of a
// value it cannot read.
package sbatch

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/core/cmdline"
	"github.com/gpuportal/gpuportal/core/job"
)

// Options are the sbatch options of a script and its command line that
// gpuportal acts on; zero values were not given.
type Options struct {
	JobName string // --job-name, -J
	// GPUsPerNode is --gres=gpu[:TYPE]:N or --gpus-per-node; GPUs is
	// --gpus, -G: the job's total.
	GPUsPerNode, GPUs int
	Nodes             int // --nodes, -N (its minimum, of MIN-MAX)
	NTasksPerNode     int // --ntasks-per-node
	NTasks            int // --ntasks, -n
	Time              string
	Array             string
	Dependencies      []job.Dependency
	Output, Error     string // --output, -o; --error, -e: Slurm's file name patterns
	Chdir             string // --chdir, -D
	// Export is --export: ExportNone for NONE, and the variables named,
	// NAME (its value from the submitting environment) or NAME=VALUE.
	Export     []string
	ExportNone bool
	ExportAll  bool
	MailTypes  []string
	MailUser   string
	// QOS is --qos, -q, when it names a batch priority (high, normal,
	// low): the job's priority within its team. Another QOS is ignored.
	QOS string
}

// Ignored is an option gpuportal reads but does not act on.
type Ignored struct {
	Line   int // 0: the command line
	Option string
	Why    string
}

func (i Ignored) String() string {
	where := "command line"
	if i.Line > 0 {
		where = "line " + strconv.Itoa(i.Line)
	}
	return fmt.Sprintf("%s: %s: %s", where, i.Option, i.Why)
}

// Error is an option whose value cannot be read.
type Error struct {
	Line   int // 0: the command line
	Option string
	Err    error
}

func (e *Error) Error() string {
	switch {
	case e.Line == 0:
		return fmt.Sprintf("%s: %v", e.Option, e.Err)
	case strings.HasPrefix(e.Option, "#!"):
		return fmt.Sprintf("line %d: %s: %v", e.Line, e.Option, e.Err)
	}
	return fmt.Sprintf("line %d: #SBATCH %s: %v", e.Line, e.Option, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Script is a batch script: its interpreter (from its #! line, /bin/sh
// when it has none), its text, and its directives.
type Script struct {
	Interpreter []string
	Text        string
	Options     Options
	Ignored     []Ignored
}

// Parse reads script text: the #SBATCH lines before its first command,
// as sbatch reads them (those after it are comments to sbatch, and to
// gpuportal).
func Parse(text string) (Script, error) {
	s := Script{Text: text, Interpreter: []string{"/bin/sh"}}
	lines := strings.Split(text, "\n")
	// sbatch refuses a script with DOS line breaks: its shell would read
	// each line's \r as part of its last word (train.py\r, a folder\r).
	for i, line := range lines {
		if strings.HasSuffix(line, "\r") {
			return s, fmt.Errorf("line %d: ends with a DOS line break (\\r\\n), as sbatch refuses too: convert the script (dos2unix FILE)", i+1)
		}
	}
	if len(lines) > 0 && strings.HasPrefix(lines[0], "#!") {
		interp := strings.Fields(strings.TrimPrefix(lines[0], "#!"))
		if len(interp) == 0 {
			return s, &Error{Line: 1, Option: "#!", Err: errors.New("names no interpreter")}
		}
		s.Interpreter = interp
	}
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if i == 0 && strings.HasPrefix(trimmed, "#!") {
			continue
		}
		if trimmed != "" && !strings.HasPrefix(trimmed, "#") {
			break // the first command: sbatch reads no directive after it
		}
		rest, ok := strings.CutPrefix(trimmed, "#SBATCH")
		if !ok {
			continue
		}
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			continue // #SBATCHX: not a directive
		}
		if c := strings.Index(rest, " #"); c >= 0 {
			rest = rest[:c] // a comment after the options
		}
		words, err := cmdline.Split(rest)
		if err != nil {
			return s, &Error{Line: i + 1, Option: strings.TrimSpace(rest), Err: err}
		}
		if err := s.Options.apply(words, i+1, &s.Ignored, true); err != nil {
			return s, err
		}
	}
	return s, nil
}

// ParseArgs reads sbatch's command line: its options, then the script
// and the script's arguments, which it returns.
func ParseArgs(args []string) (o Options, ignored []Ignored, script string, scriptArgs []string, err error) {
	n := 0
	for n < len(args) && strings.HasPrefix(args[n], "-") && args[n] != "-" {
		if args[n] == "--" {
			n++
			break
		}
		name, _, hasValue := strings.Cut(args[n], "=")
		n++
		if !hasValue && n < len(args) && takesValue(name) {
			n++
		}
	}
	if err := o.apply(args[:n], 0, &ignored, false); err != nil {
		return o, ignored, "", nil, err
	}
	if n >= len(args) {
		return o, ignored, "", nil, errors.New("no batch script given: gpuportal sbatch [OPTIONS] SCRIPT [ARGS...]")
	}
	return o, ignored, args[n], args[n+1:], nil
}

// short are sbatch's one-letter options, by their long names.
var short = map[string]string{
	"-J": "--job-name", "-G": "--gpus", "-N": "--nodes", "-n": "--ntasks", "-t": "--time", "-a": "--array",
	"-d": "--dependency", "-o": "--output", "-e": "--error", "-D": "--chdir", "-p": "--partition",
	"-c": "--cpus-per-task", "-A": "--account", "-q": "--qos", "-C": "--constraint", "-w": "--nodelist",
	"-x": "--exclude", "-i": "--input", "-M": "--clusters", "-L": "--licenses", "-H": "--hold",
	"-Q": "--quiet", "-W": "--wait", "-s": "--oversubscribe", "-k": "--no-kill", "-v": "--verbose",
}

// flags are sbatch's options that take no value.
var flags = map[string]bool{
	"--exclusive": true, "--requeue": true, "--no-requeue": true, "--hold": true, "--parsable": true,
	"--wait": true, "--test-only": true, "--overcommit": true, "--contiguous": true, "--spread-job": true,
	"--quiet": true, "--verbose": true, "--oversubscribe": true, "--no-kill": true, "--use-min-nodes": true,
	"--ignore-pbs": true, "--reboot": true, "--get-user-env": true,
}

// ignoredWhy says why an option gpuportal knows is not acted on.
var ignoredWhy = map[string]string{
	"--partition":     "gpuportal has queues of its own, by team",
	"--account":       "the job runs for your team (--team)",
	"--qos":           "gpuportal's QOS are its batch priorities within a team: high, normal and low",
	"--cpus-per-task": "CPUs and memory are allocated by gpuportal's scheduler (docs/synergy.md)",
	"--mem":           "CPUs and memory are allocated by gpuportal's scheduler (docs/synergy.md)",
	"--mem-per-cpu":   "CPUs and memory are allocated by gpuportal's scheduler (docs/synergy.md)",
	"--mem-per-gpu":   "CPUs and memory are allocated by gpuportal's scheduler (docs/synergy.md)",
	"--constraint":    "machines are chosen by gpuportal's scheduler",
	"--nodelist":      "machines are chosen by gpuportal's scheduler",
	"--exclude":       "machines are chosen by gpuportal's scheduler",
	"--exclusive":     "each job has its GPUs to itself unless it opts in to sharing",
	"--requeue":       "jobs lost with their machine are always requeued; use --retries for failures",
	"--no-requeue":    "jobs lost with their machine are always requeued",
	"--parsable":      "use gpuportal job submit --parsable",
	"--wait":          "use gpuportal job submit --wait",
	"--open-mode":     "output is appended",
	"--signal":        "a job gets SIGTERM, then SIGKILL after its agent's grace period",
	"--mail-type":     "notifications follow your settings (gpuportal notify)",
	"--mail-user":     "notifications go to your account's address (gpuportal notify)",
}

// refused are sbatch's options that gpuportal cannot honour and whose
// loss would change what the job does or when it runs: a script or
// command line with one is refused, naming it, rather than run otherwise.
var refused = map[string]string{
	"--hold":            "gpuportal cannot hold a job: submit it when it should run (or make it wait with --dependency)",
	"--begin":           "gpuportal cannot start a job later: submit it when it should run (or make it wait with --dependency)",
	"--deadline":        "gpuportal does not remove jobs that cannot end by a deadline: give a time limit (--time)",
	"--test-only":       "gpuportal has no test-only submission: the job would run",
	"--wrap":            "give the command after --: gpuportal job submit --name NAME -- COMMAND",
	"--gpus-per-task":   "give the job's GPUs with --gres=gpu:N (a machine's) or --gpus (in all)",
	"--gpus-per-socket": "give the job's GPUs with --gres=gpu:N (a machine's) or --gpus (in all)",
	"--ntasks-per-gpu":  "give --ntasks-per-node equal to the GPUs a machine (a process per GPU)",
	"--export-file":     "give the variables with --export=NAME=VALUE (or gpuportal job submit --env)",
}

// others are sbatch's other options (Slurm 22.05), which gpuportal reads
// and does not act on; an option in none of these maps is not sbatch's,
// and is refused as sbatch refuses it (a typo, say --gpus-per-nod).
var others = map[string]bool{
	"--acctg-freq": true, "--batch": true, "--bb": true, "--bbf": true, "--cluster-constraint": true,
	"--clusters": true, "--comment": true, "--container": true, "--contiguous": true, "--core-spec": true,
	"--cores-per-socket": true, "--cpu-freq": true, "--cpus-per-gpu": true, "--delay-boot": true,
	"--distribution": true, "--extra-node-info": true, "--get-user-env": true, "--gid": true, "--gpu-bind": true,
	"--gpu-freq": true, "--gres-flags": true, "--hint": true, "--ignore-pbs": true, "--input": true,
	"--kill-on-invalid-dep": true, "--licenses": true, "--mcs-label": true, "--mem-bind": true, "--mincpus": true,
	"--network": true, "--nice": true, "--no-kill": true, "--nodefile": true, "--ntasks-per-core": true,
	"--ntasks-per-socket": true, "--overcommit": true, "--oversubscribe": true, "--power": true, "--priority": true,
	"--profile": true, "--propagate": true, "--quiet": true, "--reboot": true, "--reservation": true,
	"--sockets-per-node": true, "--spread-job": true, "--switches": true, "--thread-spec": true,
	"--threads-per-core": true, "--time-min": true, "--tmp": true, "--tres-per-task": true, "--uid": true,
	"--use-min-nodes": true, "--verbose": true, "--wait-all-nodes": true, "--wckey": true,
}

// takesValue tells whether option name (long or short) takes a value.
func takesValue(name string) bool {
	if long, ok := short[name]; ok {
		name = long
	}
	return !flags[name]
}

var mailTypes = map[string]bool{
	"NONE": true, "BEGIN": true, "END": true, "FAIL": true, "REQUEUE": true, "ALL": true, "INVALID_DEPEND": true,
	"STAGE_OUT": true, "TIME_LIMIT": true, "TIME_LIMIT_90": true, "TIME_LIMIT_80": true, "TIME_LIMIT_50": true,
	"ARRAY_TASKS": true,
}

var (
	gresGPURe = regexp.MustCompile(`^gpu(?::[A-Za-z0-9_.-]+)?:(\d+)$`)
	gpusRe    = regexp.MustCompile(`^(?:[A-Za-z0-9_.-]+:)?(\d+)$`)
	exportRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(=.*)?$`)
)

// apply reads words, the options of one #SBATCH line (line > 0) or of
// the command line (line 0). In a script an option that is not sbatch's
// is an error, as sbatch makes it.
func (o *Options) apply(words []string, line int, ignored *[]Ignored, inScript bool) error {
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") || w == "-" || w == "--" {
			return &Error{Line: line, Option: w, Err: errors.New("not an option (want --name=value or -X value)")}
		}
		name, value, hasValue := strings.Cut(w, "=")
		if !strings.HasPrefix(name, "--") && len(name) > 2 {
			name, value, hasValue = name[:2], name[2:], true // -J8 as -J 8
		}
		if long, ok := short[name]; ok {
			name = long
		}
		shown := name
		if !hasValue && takesValue(name) {
			if i+1 >= len(words) {
				return &Error{Line: line, Option: name, Err: errors.New("needs a value")}
			}
			i++
			value = words[i]
		}
		if hasValue || takesValue(name) {
			shown = name + "=" + value
		}
		if err := o.set(name, value); err != nil {
			if errors.Is(err, errUnknown) {
				why, ok := ignoredWhy[name]
				switch {
				case ok:
				case others[name]:
					why = "not acted on by gpuportal"
				case refused[name] != "":
					return &Error{Line: line, Option: shown, Err: errors.New(refused[name])}
				default:
					return &Error{Line: line, Option: shown, Err: errors.New("not an sbatch option (sbatch refuses it too; a typo?)")}
				}
				*ignored = append(*ignored, Ignored{Line: line, Option: shown, Why: why})
				continue
			}
			return &Error{Line: line, Option: shown, Err: err}
		}
		if why, ok := ignoredWhy[name]; ok && (name == "--mail-type" || name == "--mail-user") {
			*ignored = append(*ignored, Ignored{Line: line, Option: shown, Why: why})
		}
	}
	return nil
}

var errUnknown = errors.New("unknown option")

// positive reads a whole number of at least 1.
func positive(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > 1<<20 {
		return 0, fmt.Errorf("%q: want a whole number of at least 1", v)
	}
	return n, nil
}

// set acts on one option.
func (o *Options) set(name, value string) (err error) {
	switch name {
	case "--job-name":
		if value == "" || len(value) > 128 {
			return errors.New("want a name of 1 to 128 characters")
		}
		o.JobName = value
	case "--gres":
		// Each gpu entry adds to the machine's GPUs, as Slurm counts
		// gpu:a100:2,gpu:v100:1: three GPUs (the types not matched).
		total := 0
		for _, g := range strings.Split(value, ",") {
			m := gresGPURe.FindStringSubmatch(strings.TrimSpace(g))
			if m == nil {
				if strings.HasPrefix(g, "gpu") {
					return fmt.Errorf("%q: want gpu:N or gpu:TYPE:N", g)
				}
				return fmt.Errorf("%q: gpuportal knows only gpu:N and gpu:TYPE:N", g)
			}
			n, err := positive(m[1])
			if err != nil {
				return err
			}
			total += n
		}
		if o.GPUsPerNode, err = positive(strconv.Itoa(total)); err != nil {
			return fmt.Errorf("%q: %d GPUs in all: %w", value, total, err)
		}
	case "--gpus-per-node":
		m := gpusRe.FindStringSubmatch(value)
		if m == nil {
			return fmt.Errorf("%q: want N or TYPE:N", value)
		}
		o.GPUsPerNode, err = positive(m[1])
	case "--gpus":
		m := gpusRe.FindStringSubmatch(value)
		if m == nil {
			return fmt.Errorf("%q: want N or TYPE:N", value)
		}
		o.GPUs, err = positive(m[1])
	case "--nodes":
		lo, _, _ := strings.Cut(value, "-")
		o.Nodes, err = positive(lo)
	case "--ntasks-per-node":
		o.NTasksPerNode, err = positive(value)
	case "--ntasks":
		o.NTasks, err = positive(value)
	case "--qos":
		if value != job.PriorityHigh && value != job.PriorityNormal && value != job.PriorityLow {
			return errUnknown // ignored, saying which QOS gpuportal knows
		}
		o.QOS = value
	case "--time":
		if _, err := job.ParseTimeLimit(value); err != nil {
			return err
		}
		o.Time = value
	case "--array":
		if _, err := job.ParseArray(value); err != nil {
			return err
		}
		o.Array = value
	case "--dependency":
		if strings.Contains(value, "?") || strings.HasPrefix(value, "singleton") {
			return errors.New("gpuportal reads afterok, afterany and afternotok, joined by ',' (all must hold)")
		}
		o.Dependencies, err = job.ParseDependencies(value)
	case "--output", "--error":
		if value == "" || strings.ContainsRune(value, 0) {
			return errors.New("want a file name pattern")
		}
		if name == "--output" {
			o.Output = value
		} else {
			o.Error = value
		}
	case "--chdir":
		if value == "" {
			return errors.New("want a folder")
		}
		o.Chdir = value
	case "--export":
		return o.export(value)
	case "--mail-type":
		for _, t := range strings.Split(value, ",") {
			if !mailTypes[strings.ToUpper(strings.TrimSpace(t))] {
				return fmt.Errorf("%q: want NONE, BEGIN, END, FAIL, REQUEUE, ALL, TIME_LIMIT, ... (comma-separated)", t)
			}
			o.MailTypes = append(o.MailTypes, strings.ToUpper(strings.TrimSpace(t)))
		}
	case "--mail-user":
		if !strings.Contains(value, "@") && strings.ContainsAny(value, " \t") {
			return fmt.Errorf("%q: want a user or an address", value)
		}
		o.MailUser = value
	default:
		return errUnknown
	}
	return err
}

// export reads --export: ALL, NONE, or variables (NAME or NAME=VALUE),
// comma-separated, after ALL or NONE or alone.
func (o *Options) export(value string) error {
	for _, part := range strings.Split(value, ",") {
		switch strings.ToUpper(part) {
		case "ALL":
			o.ExportAll = true
			continue
		case "NONE", "NIL":
			o.ExportNone = true
			continue
		}
		if !exportRe.MatchString(part) {
			return fmt.Errorf("%q: want ALL, NONE, NAME or NAME=VALUE", part)
		}
		name, _, _ := strings.Cut(part, "=")
		if err := job.CheckEnvName(name); err != nil {
			return err
		}
		o.Export = append(o.Export, part)
	}
	return nil
}

// Merge returns o with what over gives (the command line over the
// script, as sbatch does).
func (o Options) Merge(over Options) Options {
	s := func(a *string, b string) {
		if b != "" {
			*a = b
		}
	}
	n := func(a *int, b int) {
		if b != 0 {
			*a = b
		}
	}
	s(&o.JobName, over.JobName)
	n(&o.GPUsPerNode, over.GPUsPerNode)
	n(&o.GPUs, over.GPUs)
	n(&o.Nodes, over.Nodes)
	n(&o.NTasksPerNode, over.NTasksPerNode)
	n(&o.NTasks, over.NTasks)
	s(&o.Time, over.Time)
	s(&o.Array, over.Array)
	s(&o.Output, over.Output)
	s(&o.Error, over.Error)
	s(&o.Chdir, over.Chdir)
	s(&o.MailUser, over.MailUser)
	if over.Dependencies != nil {
		o.Dependencies = over.Dependencies
	}
	if over.Export != nil || over.ExportNone || over.ExportAll {
		o.Export, o.ExportNone, o.ExportAll = over.Export, over.ExportNone, over.ExportAll
	}
	if over.MailTypes != nil {
		o.MailTypes = over.MailTypes
	}
	return o
}

// OutputRedirect is the shell line that sends a script's output where
// --output and --error say, as Slurm names the files: %j the job's ID, %A
// and %a the array's ID and the task's index, %x the job's name, %N the
// machine, %u the user, %% a %. "" when neither was given.
func OutputRedirect(output, errPattern string) string {
	var b strings.Builder
	if output != "" {
		b.WriteString("exec >>" + shellPattern(output))
		if errPattern == "" {
			b.WriteString(" 2>&1")
		}
	}
	if errPattern != "" {
		if b.Len() == 0 {
			b.WriteString("exec")
		}
		b.WriteString(" 2>>" + shellPattern(errPattern))
	}
	if b.Len() == 0 {
		return ""
	}
	return b.String() + "\n"
}

// shellPattern writes Slurm's file name pattern p as a double-quoted
// shell word.
func shellPattern(p string) string {
	vars := map[byte]string{
		'j': "${SLURM_JOB_ID}", 'J': "${SLURM_JOB_ID}", 'A': "${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}",
		'a': "${SLURM_ARRAY_TASK_ID:-4294967294}", 'x': "${SLURM_JOB_NAME}", 'N': "${SLURMD_NODENAME}",
		'n': "${SLURM_NODEID}", 'u': "${USER}", 't': "${SLURM_PROCID:-0}", 's': "batch",
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '%' && i+1 < len(p):
			i++
			if v, ok := vars[p[i]]; ok {
				b.WriteString(v)
			} else {
				b.WriteByte(p[i]) // %% and unknown ones: the character
			}
		case c == '"' || c == '$' || c == '`' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Shell tells whether interp (a #! line's words) is a POSIX shell, whose
// scripts gpuportal runs as INTERPRETER -c TEXT NAME ARGS.
func Shell(interp []string) bool {
	prog := filepath.Base(interp[0])
	if prog == "env" && len(interp) > 1 {
		prog = filepath.Base(interp[1])
	}
	switch strings.TrimRight(prog, "0123456789.") {
	case "sh", "bash", "dash", "ksh", "zsh", "mksh":
		return true
	}
	return false
}
