package web

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/cmdline"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/memest"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
)

// Limits on what a job may ask for.
const (
	maxJobName     = 128
	maxGPUs        = 1024
	maxSimDuration = 30 * 24 * 3600 // seconds
	maxCommandLen  = 8192
	maxGPUMemGB    = 1024
)

// SubmitRequest is a job as a user submits it, from the form or the API.
type SubmitRequest struct {
	Name    string  `json:"name"`
	Team    string  `json:"team"`
	GPUs    int     `json:"gpus"`
	Command Command `json:"command,omitempty"`
	// Image is the container image the command runs in (docs/agents.md,
	// "Container jobs"); empty: on the machine.
	Image    string       `json:"image,omitempty"`
	Sim      *api.SimSpec `json:"sim,omitempty"`
	GPUMemGB float64      `json:"gpu_mem_gb,omitempty"`
	// Model is the job's model, from the catalogue of sched.Models; it
	// tells placement whether to keep the job's GPUs on few machines.
	Model string `json:"model,omitempty"`
	// Salus sharing (submit_sharing.go): opt in, or ask for a fraction of
	// a GPU; the memory estimate from the declared persistent and
	// ephemeral memory, else the model and batch size, else the
	// parameter count and batch size.
	Sharing          bool    `json:"sharing,omitempty"`
	GPUFraction      float64 `json:"gpu_fraction,omitempty"`
	MemPersistentMiB int64   `json:"mem_persistent_mib,omitempty"`
	MemEphemeralMiB  int64   `json:"mem_ephemeral_mib,omitempty"`
	BatchSize        int     `json:"batch_size,omitempty"`
	Parameters       int64   `json:"parameters,omitempty"`
	// CPUProfile declares the job's CPU and host memory sensitivity
	// (submit_profile.go, docs/synergy.md); without it the job's profile
	// is learned from history, measured, or the catalogue's.
	CPUProfile *CPUProfileRequest `json:"cpu_profile,omitempty"`
	// What the job runs with (submit_job.go): its own variables, the
	// folder it starts in (absolute, or inside its job folder), its time
	// limit (as Slurm's --time or a duration: "2h", "1-00:00:00"), how
	// many times a run that fails on its own is started again, and the
	// jobs it waits for.
	Env          map[string]string `json:"env,omitempty"`
	Workdir      string            `json:"workdir,omitempty"`
	TimeLimit    string            `json:"time_limit,omitempty"`
	Retries      int               `json:"retries,omitempty"`
	Dependencies []job.Dependency  `json:"dependencies,omitempty"`
	// Array makes the submission an array of tasks, as Slurm's --array
	// writes it ("0-5%2"); ArrayParams is a CSV table, a header naming
	// variables then one row per task, each row the variables of its
	// task (alone, it makes one task per row).
	Array       string `json:"array,omitempty"`
	ArrayParams string `json:"array_params,omitempty"`
	// Session makes the job an interactive session (sessions.go).
	Session *SessionRequest `json:"session,omitempty"`
}

// Command is argv. In JSON it is a list of strings, or one string that is
// split into words as a shell would (without running a shell).
type Command []string

// UnmarshalJSON accepts a list of strings or a command line.
func (c *Command) UnmarshalJSON(b []byte) error {
	var line string
	if err := json.Unmarshal(b, &line); err == nil {
		argv, err := cmdline.Split(line)
		if err != nil {
			return fmt.Errorf("command %s", err)
		}
		*c = argv
		return nil
	}
	var argv []string
	if err := json.Unmarshal(b, &argv); err != nil {
		return fmt.Errorf("command must be a string or a list of strings")
	}
	*c = argv
	return nil
}

// fieldErrors maps a field name to what is wrong with it.
type fieldErrors map[string]string

// first returns one error message naming its field, for APIs that return one.
func (fe fieldErrors) first() string {
	for _, k := range []string{"name", "team", "gpus", "session.type", "session.port", "command", "image", "sim", "sim.duration_s", "model", "gpu_mem_gb", "sharing", "gpu_fraction", "mem_persistent_mib", "mem_ephemeral_mib", "batch_size", "parameters",
		"cpu_profile", "cpu_profile.family", "cpu_profile.cpu_curve", "cpu_profile.mem_curve",
		"env", "workdir", "time_limit", "retries", "dependencies", "array", "array_params"} {
		if msg, ok := fe[k]; ok {
			return k + ": " + msg
		}
	}
	for k, msg := range fe {
		return k + ": " + msg
	}
	return ""
}

// validate checks r for user u and returns the job to store, or what is
// wrong field by field. clusterGPUs is the number of GPUs connected now
// (0 when none is, which does not limit the request).
func (r SubmitRequest) validate(u *models.User, teams []string, clusterGPUs int) (*models.Job, fieldErrors) {
	fe := fieldErrors{}
	name := r.Name
	switch {
	case strings.TrimSpace(name) == "":
		fe["name"] = "is required"
	case strings.TrimSpace(name) != name:
		fe["name"] = "begins or ends with white space: remove it"
	case len(name) > maxJobName:
		fe["name"] = fmt.Sprintf("is longer than %d characters", maxJobName)
	case !utf8.ValidString(name):
		fe["name"] = "is not valid UTF-8"
	case strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		fe["name"] = "contains control characters"
	}
	team := r.Team
	if team == "" {
		team = u.Team
	}
	switch {
	case team == "":
		fe["team"] = "is required"
	case !slices.Contains(teams, team):
		fe["team"] = fmt.Sprintf("unknown team %q", team)
	case u.Role != models.RoleAdmin && team != u.Team:
		fe["team"] = fmt.Sprintf("you may submit only to your team %q", u.Team)
	}
	if r.GPUs == 0 && r.GPUFraction != 0 {
		r.GPUs = 1 // a fraction of a GPU is a job of one GPU
	}
	switch {
	case r.GPUs < 1:
		fe["gpus"] = "must be at least 1"
	case r.GPUs > maxGPUs:
		fe["gpus"] = fmt.Sprintf("must be at most %d", maxGPUs)
	case clusterGPUs > 0 && r.GPUs > clusterGPUs:
		fe["gpus"] = fmt.Sprintf("asks for %d GPUs but the cluster has %d", r.GPUs, clusterGPUs)
	}
	switch {
	case r.Session != nil:
		r.Session.check(fe, r)
	case len(r.Command) > 0 && r.Sim != nil:
		fe["command"] = "give either command or sim, not both"
	case len(r.Command) == 0 && r.Sim == nil:
		fe["command"] = "is required (or sim for a simulated job)"
	case len(r.Command) > 0:
		if msg := checkArgv(r.Command); msg != "" {
			fe["command"] = msg
		}
	default:
		d := r.Sim.DurationS
		if math.IsNaN(d) || d < 1 || d > maxSimDuration {
			fe["sim.duration_s"] = fmt.Sprintf("must be between 1 and %d seconds", maxSimDuration)
		}
		if u := r.Sim.UtilPct; u != nil && (math.IsNaN(*u) || *u < 0 || *u > 100) {
			fe["sim.util_pct"] = "must be between 0 and 100"
		}
	}
	if r.Image != "" {
		switch {
		case len(r.Command) == 0:
			fe["image"] = "needs a command to run in it (a simulated job has no image)"
		default:
			if err := job.CheckImage(r.Image); err != nil {
				fe["image"] = err.Error()
			}
		}
	}
	model := strings.ToLower(strings.TrimSpace(r.Model))
	if model != "" {
		if _, ok := sched.LookupModel(model); !ok && !memestModel(model) {
			fe["model"] = fmt.Sprintf("unknown model %q (known: %s)", r.Model, strings.Join(modelNames(), ", "))
		}
	}
	switch m := r.GPUMemGB; {
	case math.IsNaN(m) || m < 0 || m > maxGPUMemGB:
		fe["gpu_mem_gb"] = fmt.Sprintf("must be between 0 and %d", maxGPUMemGB)
	case m > 0 && int64(m*1024) == 0:
		// Kept in MiB: less than one would be 0, no memory declared.
		fe["gpu_mem_gb"] = fmt.Sprintf("%v is less than 1 MiB: give 0 (none declared) or at least 0.001", m)
	}
	share := r.sharing(fe, model)
	profile := r.declaredProfile(fe)
	spec := r.spec(fe)
	if len(fe) > 0 {
		return nil, fe
	}
	j := &models.Job{
		Name: name, Team: team, User: u.Name, GPUs: r.GPUs,
		Command:   models.Strings(r.Command),
		Image:     r.Image,
		GPUMemMiB: int64(r.GPUMemGB * 1024),
		Model:     model,
	}
	if r.Sim != nil {
		j.SimDuration, j.SimUtilPct = r.Sim.DurationS, r.Sim.UtilPct
	}
	if r.Session != nil {
		j.SessionType, j.SessionPort, j.InteractivePriority = r.Session.Type, r.Session.Port, r.Session.Priority
	}
	share.apply(j)
	spec.apply(j)
	if err := j.SetDeclaredProfile(profile); err != nil {
		return nil, fieldErrors{"cpu_profile": err.Error()}
	}
	return j, nil
}

// modelNames lists the models a job may declare.
func modelNames() []string {
	var names []string
	for _, m := range sched.Models() {
		names = append(names, m.Name)
	}
	for _, e := range memest.Entries() {
		if !slices.Contains(names, e.Model) {
			names = append(names, e.Model)
		}
	}
	return names
}

func checkArgv(argv []string) string {
	if argv[0] == "" {
		return "the program name is empty"
	}
	n := 0
	for _, a := range argv {
		if strings.ContainsRune(a, 0) {
			return "contains a NUL byte"
		}
		if !utf8.ValidString(a) {
			return "is not valid UTF-8"
		}
		n += len(a)
	}
	if n > maxCommandLen {
		return fmt.Sprintf("is longer than %d bytes", maxCommandLen)
	}
	return ""
}
