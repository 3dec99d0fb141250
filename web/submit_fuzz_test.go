package web

import (
	"bytes"
	"context"
	"html"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/templates"
)

// submitFields are the fields of a job submission, as its errors name
// them: the JSON fields and sim.duration_s.
var submitFields = []string{"name", "team", "gpus", "command", "image", "sim", "sim.duration_s", "sim.util_pct", "model", "gpu_mem_gb",
	"sharing", "gpu_fraction", "mem_persistent_mib", "mem_ephemeral_mib", "batch_size", "parameters",
	"cpu_profile", "cpu_profile.family", "cpu_profile.cpu_curve", "cpu_profile.mem_curve",
	"env", "workdir", "time_limit", "retries", "dependencies", "array", "array_params",
	"session", "session.type", "session.port", "session.priority"}

// fuzzTeams and fuzzUsers are who submits in the fuzz tests: a researcher,
// a lead and an admin of no team.
var (
	fuzzTeams = []string{"vision", "nlp"}
	fuzzUsers = []*app.User{
		{Name: "alice", Role: app.RoleResearcher, Team: "vision"},
		{Name: "lead", Role: app.RoleLead, Team: "nlp"},
		{Name: "admin", Role: app.RoleAdmin},
	}
)

// namesField reports whether msg begins with the name of a field of a
// job submission ("gpus: ...", "command must be ...", "env.LR: ...").
func namesField(msg string) bool {
	for _, f := range submitFields {
		if rest, ok := strings.CutPrefix(msg, f); ok && (strings.HasPrefix(rest, ": ") || strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, ".")) {
			return true
		}
	}
	return false
}

// quoted matches the user's own input quoted in a message (Go's %q).
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// checkClear fails t unless a rejection's message is one a person can act
// on: not empty, and (outside the user's input it quotes) free of Go's
// names for types.
func checkClear(t *testing.T, input any, msg string) {
	t.Helper()
	if strings.TrimSpace(msg) == "" {
		t.Fatalf("%q: rejected with an empty message", input)
	}
	own := quoted.ReplaceAllString(msg, `""`)
	for _, goism := range []string{"web.", "models.", "struct", "map["} {
		if strings.Contains(own, goism) {
			t.Fatalf("%q: message %q speaks of Go's types (%q), not the request's", input, msg, goism)
		}
	}
}

// checkSubmit validates req as each user, on an empty cluster and on one
// of 8 GPUs, and checks that each error names a field and speaks the
// request's words (app's FuzzValidate checks the jobs accepted). It returns the field errors of the first
// user (alice) on the 8-GPU cluster.
func checkSubmit(t *testing.T, input any, req api.SubmitRequest) fieldErrors {
	t.Helper()
	var aliceErrs fieldErrors
	for _, u := range fuzzUsers {
		for _, clusterGPUs := range []int{0, 8} {
			fe := app.SubmitErrors(u, req, fuzzTeams, clusterGPUs)
			if u == fuzzUsers[0] && clusterGPUs == 8 {
				aliceErrs = fe
			}
			if len(fe) == 0 {
				continue // app's FuzzValidate checks the job it stores
			}
			for k, msg := range fe {
				if !slices.Contains(submitFields, k) {
					t.Fatalf("%q as %s: error for unknown field %q: %s", input, u.Name, k, msg)
				}
				checkClear(t, input, msg)
			}
			if first := fe.First(); !namesField(first) {
				t.Fatalf("%q as %s: first error %q names no field", input, u.Name, first)
			}
		}
	}
	return aliceErrs
}

// FuzzSubmitJSON feeds arbitrary bodies to the API's decoding and
// validation of a job (apiSubmit without the store): no panic, and every
// rejection is a clear message about the body or one of its fields.
func FuzzSubmitJSON(f *testing.F) {
	for _, s := range []string{
		`{"name":"resnet","gpus":2,"sim":{"duration_s":60}}`,
		`{"name":"cmd","team":"vision","gpus":1,"command":["python","train.py"],"gpu_mem_gb":12.5,"model":"resnet50"}`,
		`{"name":"cmd","gpus":1,"command":"python \"train file.py\" --lr 0.1"}`,
		`{"name":"x","gpus":1,"command":"python 'unclosed"}`,
		`{"name":"x","gpus":1,"command":[""]}`,
		`{"name":"x","gpus":1,"command":5}`,
		`{"name":"x","gpus":"two"}`,
		`{"name":"x","gpus":1e400,"sim":{"duration_s":1}}`,
		`{"name":"x","gpus":1,"sim":{"duration_s":"long"}}`,
		`{"name":"x","gpus":1,"sim":{"duration_s":-1}}`,
		`{"name":"x","gpus":1,"gpu":2}`,
		`{"name":" \u0007 ","gpus":1,"sim":{"duration_s":1}}`,
		`{"name":"x","team":"ghosts","gpus":1,"sim":{"duration_s":1}}`,
		`{"name":"x","gpus":1,"model":"RESNET50 ","sim":{"duration_s":1}}`,
		`{"name":"share","gpu_fraction":0.25,"model":"vgg16","batch_size":50,"sim":{"duration_s":60}}`,
		`{"name":"share","gpus":2,"sharing":true,"mem_persistent_mib":-1,"sim":{"duration_s":60}}`,
		`{"name":"p","gpus":1,"cpu_profile":{"family":"image-cnn"},"sim":{"duration_s":60}}`,
		`{"name":"p","gpus":1,"cpu_profile":{"cpu_curve":[[1,0.5],[2,0.4]],"mem_curve":[[0]]},"sim":{"duration_s":60}}`,
		`{"name":"p","gpus":1,"cpu_profile":{"family":5},"sim":{"duration_s":60}}`,
		`{"name":"r","gpus":1,"command":"x","env":{"LR":"1","GPUPORTAL_X":"2"},"workdir":"../up","time_limit":"1-25:99"}`,
		`{"name":"r","gpus":1,"command":"x","env":{"":"1"},"retries":99,"dependencies":[{"kind":"afterok","job_id":-4}]}`,
		`{"name":"r","gpus":1,"command":"x","env":5,"dependencies":"afterok:3"}`,
		`{"name":"a","gpus":1,"sim":{"duration_s":5},"array":"0-3%2","array_params":"LR\n1\n2\n3\n4\n"}`,
		`{"name":"a","gpus":1,"sim":{"duration_s":5},"array":"0-99999999999","array_params":"\"unclosed"}`,
		`{"name":`, ``, `null`, `{}`,
		// Found by this fuzzer: Go type names leaked into the messages.
		`5`, `[]`, `"x"`, `000`, `{"sim":5}`,
	} {
		f.Add([]byte(s))
	}
	for _, s := range unboundedSubmits {
		f.Add([]byte(s.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req api.SubmitRequest
		if err := strictJSON(body, &req); err != nil {
			msg := err.Error()
			checkClear(t, string(body), msg)
			if !namesField(msg) && !strings.HasPrefix(msg, "body ") && !strings.HasPrefix(msg, "body: ") && !strings.HasPrefix(msg, "unknown field ") {
				t.Fatalf("%q: rejected with %q, which names neither the body nor a field", body, msg)
			}
			return
		}
		checkSubmit(t, string(body), req)
	})
}

// FuzzSubmitForm feeds arbitrary values to the submit form's reading and
// validation (submitForm without the store): no panic, every rejection
// names a field the form shows, and the page shows its message there.
func FuzzSubmitForm(f *testing.F) {
	f.Add("resnet", "vision", "2", "sim", "", "60", "", "")
	f.Add("cmd", "", "1", "command", `python "train file.py" --lr 0.1`, "", "12.5", "resnet50")
	f.Add("", "nlp", "0", "command", `python "unclosed`, "", "", "")
	f.Add("x", "vision", "two", "sim", "", "soon", "lots", "gpt-9")
	f.Add("x", "vision", "1", "sim", "", "NaN", "Inf", "")
	f.Add("x\x00", "vision", " 3 ", "command", "   ", "", "-1", "")
	// Invalid UTF-8 reached PostgreSQL (a 500) and was silently rewritten in commands.
	f.Add("a\xff", "vision", "1", "command", "run \xfe", "", "", "")
	f.Fuzz(func(t *testing.T, name, team, gpus, kind, command, duration, mem, model string) {
		form := templates.SubmitForm{
			Name: name, Team: team, GPUs: gpus, Kind: kind, Command: command,
			DurationS: duration, GPUMemGB: mem, Model: model,
		}
		req, fe := formRequest(form)
		for k, msg := range fe {
			if !slices.Contains(submitFields, k) {
				t.Fatalf("%+v: form error for unknown field %q: %s", form, k, msg)
			}
			checkClear(t, form, msg)
		}
		more := checkSubmit(t, form, req)
		// As submitForm: the form's own errors first, then validation's.
		for k, v := range more {
			if _, ok := fe[k]; !ok {
				fe[k] = v
			}
		}
		if len(fe) == 0 {
			return
		}
		form.Teams, form.Errors, form.Models = fuzzTeams, fe, app.ModelNames()
		var page bytes.Buffer
		if err := templates.Submit(templates.Page{Title: "Submit"}, form).Render(context.Background(), &page); err != nil {
			t.Fatalf("%+v: render the form: %v", form, err)
		}
		for k, msg := range fe {
			if !strings.Contains(page.String(), html.EscapeString(msg)) {
				t.Fatalf("%+v: the page does not show the error of %s: %q", form, k, msg)
			}
		}
	})
}
