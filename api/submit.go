package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/core/cmdline"
	"github.com/gpuportal/gpuportal/core/job"
)

// The requests a client sends: a job's submission (POST /api/v1/jobs,
// the submit form, job templates), and the bodies of the job actions.

// MaxProfilePoints is the most points a declared curve may have.
const MaxProfilePoints = 32

// SubmitRequest is a job as a user submits it, from the form or the API.
type SubmitRequest struct {
	Name    string  `json:"name"`
	Team    string  `json:"team"`
	GPUs    int     `json:"gpus"`
	Command Command `json:"command,omitempty"`
	// Image is the container image the command runs in (docs/agents.md,
	// "Container jobs"); empty: on the machine.
	Image    string   `json:"image,omitempty"`
	Sim      *SimSpec `json:"sim,omitempty"`
	GPUMemGB float64  `json:"gpu_mem_gb,omitempty"`
	// Model is the job's model, from the catalogue of sched.Models; it
	// tells placement whether to keep the job's GPUs on few machines.
	Model string `json:"model,omitempty"`
	// Salus sharing (app/validate.go, docs/salus.md): opt in, or ask for a fraction of
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
	// (docs/synergy.md); without it the job's profile
	// is learned from history, measured, or the catalogue's.
	CPUProfile *CPUProfileRequest `json:"cpu_profile,omitempty"`
	// What the job runs with (app/validate.go): its own variables, the
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
	// Session makes the job an interactive session (docs/portal.md).
	Session *SessionRequest `json:"session,omitempty"`
	// TasksPerGPU starts the command once per GPU of each machine, each
	// with its RANK and LOCAL_RANK, rather than once per machine
	// (docs/multinode.md; srun --ntasks-per-gpu=1).
	TasksPerGPU bool `json:"tasks_per_gpu,omitempty"`
	// Priority is a batch job's priority within its team: high, normal
	// (the default, also "") or low, among those its team allows
	// (BatchPolicy; docs/scheduling.md, "Job classes").
	Priority string `json:"priority,omitempty"`
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

// CPUProfileRequest is a job's CPU and host memory sensitivity as its user
// declares it (docs/synergy.md): a family of the catalogue, or curves, or
// a family with a curve that replaces the family's for that resource.
// Curves are [x, speed] points: x in cores per GPU (cpu_curve) or GiB of
// host memory per GPU (mem_curve), rising; speed in (0, 1], relative to
// the job's best, never falling. A resource without a curve (and no
// family) does not matter to the job.
type CPUProfileRequest struct {
	Family   string      `json:"family,omitempty"`
	CPUCurve [][]float64 `json:"cpu_curve,omitempty"`
	MemCurve [][]float64 `json:"mem_curve,omitempty"`
}

// SessionRequest asks for an interactive session instead of a batch job.
type SessionRequest struct {
	// Type is jupyter, terminal or web.
	Type string `json:"type"`
	// Port is the loopback port a web app listens on; 0: the agent picks
	// one and passes it as $PORT.
	Port int `json:"port,omitempty"`
	// Priority asks for interactive priority: ahead of the team's other
	// waiting jobs, within the GPUs its team allows sessions with it.
	Priority bool `json:"priority,omitempty"`
}

// KeepAliveRequest is the body of POST /api/v1/jobs/{id}/keep-alive.
type KeepAliveRequest struct {
	Hours float64 `json:"hours"`
}

// ParseCurve reads a curve written as x:speed pairs separated by commas
// or semicolons, such as "1:0.4,2:0.7,4:1" (the submit form's curve
// fields and gpuportal job submit --cpu-curve); the empty text is no
// curve. Checking the values is left to the server.
func ParseCurve(s string) ([][]float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' })
	if len(parts) > MaxProfilePoints {
		return nil, fmt.Errorf("has %d points, at most %d", len(parts), MaxProfilePoints)
	}
	out := make([][]float64, 0, len(parts))
	for i, part := range parts {
		xs, ys, ok := strings.Cut(strings.TrimSpace(part), ":")
		x, errX := strconv.ParseFloat(strings.TrimSpace(xs), 64)
		y, errY := strconv.ParseFloat(strings.TrimSpace(ys), 64)
		if !ok || errX != nil || errY != nil {
			return nil, fmt.Errorf("point %d %q: want x:speed, such as 2:0.7", i+1, strings.TrimSpace(part))
		}
		out = append(out, []float64{x, y})
	}
	return out, nil
}
