package app

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// FuzzValidate feeds arbitrary submissions to validate as a researcher, a
// lead and an admin of no team, on an empty cluster and on one of 8 GPUs:
// no panic, and either errors or a job within every limit, never both or
// neither. (web's FuzzSubmitJSON and FuzzSubmitForm check that the errors
// name the request's fields, through the API's decoding and the form's.)
func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		`{"name":"resnet","gpus":2,"sim":{"duration_s":60}}`,
		`{"name":"cmd","team":"vision","gpus":1,"command":["python","train.py"],"gpu_mem_gb":12.5,"model":"resnet50"}`,
		`{"name":"cmd","gpus":1,"command":"python \"train file.py\" --lr 0.1"}`,
		`{"name":"x","gpus":1,"command":[""]}`,
		`{"name":" \u0007 ","gpus":1,"sim":{"duration_s":1}}`,
		`{"name":"x","team":"ghosts","gpus":1,"sim":{"duration_s":1}}`,
		`{"name":"share","gpu_fraction":0.25,"model":"vgg16","batch_size":50,"sim":{"duration_s":60}}`,
		`{"name":"share","gpus":2,"sharing":true,"mem_persistent_mib":-1,"sim":{"duration_s":60}}`,
		`{"name":"p","gpus":1,"cpu_profile":{"cpu_curve":[[1,0.5],[2,0.4]],"mem_curve":[[0]]},"sim":{"duration_s":60}}`,
		`{"name":"r","gpus":1,"command":"x","env":{"LR":"1","GPUPORTAL_X":"2"},"workdir":"../up","time_limit":"1-25:99"}`,
		`{"name":"r","gpus":1,"command":"x","env":{"":"1"},"retries":99,"dependencies":[{"kind":"afterok","job_id":-4}]}`,
		`{"name":"a","gpus":1,"sim":{"duration_s":5},"array":"0-3%2","array_params":"LR\n1\n2\n3\n4\n"}`,
		`{"name":"a\ud800","gpus":1,"command":"run \udfff"}`,
		`{"name":"s","gpus":1,"session":{"type":"terminal"},"priority":"high"}`,
	} {
		f.Add([]byte(s))
	}
	users := []*User{
		{Name: "alice", Role: RoleResearcher, Team: "vision"},
		{Name: "lead", Role: RoleLead, Team: "nlp"},
		{Name: "admin", Role: RoleAdmin},
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req api.SubmitRequest
		if json.Unmarshal(body, &req) != nil {
			return // web's fuzz tests read bodies
		}
		for _, u := range users {
			for _, clusterGPUs := range []int{0, 8} {
				j, fe := validate(u, req, fuzzTeams, clusterGPUs)
				if (j == nil) == (len(fe) == 0) {
					t.Fatalf("%q as %s: job %v with errors %v; want exactly one of them", body, u.Name, j, fe)
				}
				if j != nil {
					checkJob(t, string(body), u, clusterGPUs, j)
				}
			}
		}
	})
}

// fuzzTeams are the teams of FuzzValidate's cluster.
var fuzzTeams = []string{"vision", "nlp"}

// checkJob checks that an accepted job is within every limit.
func checkJob(t *testing.T, input any, u *User, clusterGPUs int, j *models.Job) {
	t.Helper()
	fail := func(what string) {
		t.Helper()
		t.Fatalf("%q as %s accepted with %s: %+v", input, u.Name, what, j)
	}
	switch {
	case j.Name == "" || j.Name != strings.TrimSpace(j.Name) || len(j.Name) > MaxJobName:
		fail("a bad name")
	case !utf8.ValidString(j.Name) || !utf8.ValidString(j.Model):
		// PostgreSQL refuses text that is not UTF-8: a 500 at insert time.
		fail("text that is not UTF-8")
	case !slices.Contains(fuzzTeams, j.Team) || (u.Role != RoleAdmin && j.Team != u.Team):
		fail("a team the user may not submit to")
	case j.User != u.Name:
		fail("another user")
	case j.GPUs < 1 || j.GPUs > MaxGPUs || (clusterGPUs > 0 && j.GPUs > clusterGPUs):
		fail("a GPU count out of range")
	case (len(j.Command) > 0) == (j.SimDuration > 0):
		fail("not exactly one of command and simulation")
	case len(j.Command) > 0 && j.Command[0] == "":
		fail("an empty program name")
	case j.SimDuration < 0 || j.SimDuration > MaxSimDuration || math.IsNaN(j.SimDuration):
		fail("a simulated duration out of range")
	case j.GPUMemMiB < 0 || j.GPUMemMiB > MaxGPUMemGB*1024:
		fail("GPU memory out of range")
	case j.SimDuration != 0 && j.SimDuration < 1:
		fail("a simulated duration under a second")
	case j.GPUFraction != 0 && (j.GPUFraction < MinGPUFraction || j.GPUFraction >= 1):
		fail("a fraction of a GPU out of range")
	case j.ArrayLimit < 0 || j.ArrayLimit > job.MaxArrayTasks:
		fail("an array limit out of range")
	}
	for _, kv := range j.Env {
		if !utf8.ValidString(kv) || strings.ContainsRune(kv, 0) {
			fail("a variable that is not UTF-8 or holds a NUL byte")
		}
	}
	n := 0
	for _, a := range j.Command {
		if strings.ContainsRune(a, 0) {
			fail("a NUL byte in the command")
		}
		if !utf8.ValidString(a) {
			// The store keeps the command as JSON, which would turn the
			// bytes into U+FFFD: the job would run another command.
			fail("a command that is not UTF-8")
		}
		n += len(a)
	}
	if n > MaxCommandLen {
		fail("a command that is too long")
	}
}
