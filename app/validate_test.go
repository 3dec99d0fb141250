package app

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
)

func TestSessionRequestCheck(t *testing.T) {
	cases := []struct {
		name    string
		req     api.SubmitRequest
		wantErr map[string]string // field -> part of its message
	}{
		{"jupyter with nothing else", api.SubmitRequest{Session: &api.SessionRequest{Type: "jupyter"}}, nil},
		{"jupyter with its own program", api.SubmitRequest{Session: &api.SessionRequest{Type: "jupyter"}, Command: api.Command{"/opt/venv/bin/jupyter-lab"}}, nil},
		{"terminal", api.SubmitRequest{Session: &api.SessionRequest{Type: "terminal"}}, nil},
		{"web app on a named port", api.SubmitRequest{Session: &api.SessionRequest{Type: "web", Port: 6006}, Command: api.Command{"tensorboard", "--logdir", "runs"}}, nil},
		{"web app on $PORT", api.SubmitRequest{Session: &api.SessionRequest{Type: "web"}, Command: api.Command{"sh", "-c", "serve --port $PORT"}}, nil},
		{"unknown type", api.SubmitRequest{Session: &api.SessionRequest{Type: "vnc"}}, map[string]string{"session.type": "unknown session type"}},
		{"empty type", api.SubmitRequest{Session: &api.SessionRequest{}}, map[string]string{"session.type": "want jupyter"}},
		{"terminal with a command", api.SubmitRequest{Session: &api.SessionRequest{Type: "terminal"}, Command: api.Command{"bash"}}, map[string]string{"command": "leave command empty"}},
		{"web app without a command", api.SubmitRequest{Session: &api.SessionRequest{Type: "web", Port: 8080}}, map[string]string{"command": "is required for a web session"}},
		{"port for jupyter", api.SubmitRequest{Session: &api.SessionRequest{Type: "jupyter", Port: 8888}}, map[string]string{"session.port": "only for web sessions"}},
		{"port out of range", api.SubmitRequest{Session: &api.SessionRequest{Type: "web", Port: 70000}, Command: api.Command{"x"}}, map[string]string{"session.port": "between 1 and 65535"}},
		{"negative port", api.SubmitRequest{Session: &api.SessionRequest{Type: "web", Port: -1}, Command: api.Command{"x"}}, map[string]string{"session.port": "between 1 and 65535"}},
		{"a simulated session", api.SubmitRequest{Session: &api.SessionRequest{Type: "jupyter"}, Sim: &api.SimSpec{DurationS: 5}}, map[string]string{"sim": "not a simulated job"}},
		{"a command with a NUL", api.SubmitRequest{Session: &api.SessionRequest{Type: "web"}, Command: api.Command{"a\x00b"}}, map[string]string{"command": ""}},
	}
	u := &User{Name: "alice", Team: "vision", Role: RoleResearcher}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.req
			r.Name, r.GPUs = "s", 1
			j, fe := validate(u, r, []string{"vision"}, 0)
			if len(c.wantErr) == 0 {
				if len(fe) > 0 {
					t.Fatalf("refused: %v", fe)
				}
				if !j.IsSession() || j.SessionType != r.Session.Type || j.SessionPort != r.Session.Port {
					t.Errorf("job's session: %q port %d, want %q port %d", j.SessionType, j.SessionPort, r.Session.Type, r.Session.Port)
				}
				return
			}
			for field, part := range c.wantErr {
				if msg, ok := fe[field]; !ok || !strings.Contains(msg, part) {
					t.Errorf("%s: %q, want it to say %q (all: %v)", field, msg, part, fe)
				}
			}
			if first := fe.First(); first == "" {
				t.Error("first names no field")
			}
		})
	}
}

func TestValidateTasksPerGPU(t *testing.T) {
	u := &User{Name: "ann", Team: "vision", Role: RoleResearcher}
	base := api.SubmitRequest{Name: "ddp", Team: "vision", GPUs: 4, Command: api.Command{"python3", "train.py"}, TasksPerGPU: true}
	j, fe := validate(u, base, []string{"vision"}, 8)
	if len(fe) != 0 || !j.TasksPerGPU {
		t.Fatalf("a command with a process per GPU: %v, %+v", fe, j)
	}
	if back := requestOf(j); !back.TasksPerGPU {
		t.Error("RequestOf drops tasks_per_gpu")
	}
	for name, edit := range map[string]func(*api.SubmitRequest){
		"simulated": func(r *api.SubmitRequest) { r.Command, r.Sim = nil, &api.SimSpec{DurationS: 60} },
		"image":     func(r *api.SubmitRequest) { r.Image = "localhost/train:1" },
	} {
		r := base
		edit(&r)
		if _, fe := validate(u, r, []string{"vision"}, 8); !strings.Contains(fe["tasks_per_gpu"], "not a simulated job") {
			t.Errorf("%s: tasks_per_gpu %q, want it refused (all: %v)", name, fe["tasks_per_gpu"], fe)
		}
	}
}

// TestValidateEnvNames checks that a variable's name in the API's env
// object is checked as a name: "A=B" is refused, never read as A set to
// "B=value".
func TestValidateEnvNames(t *testing.T) {
	u := &User{Name: "ann", Team: "vision", Role: RoleResearcher}
	for _, tc := range []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"a plain name", map[string]string{"DATA": "/data"}, true},
		{"a value with =", map[string]string{"OPTS": "a=b"}, true},
		{"a name with =", map[string]string{"A=B": "c"}, false},
		{"an empty name", map[string]string{"": "c"}, false},
		{"a name starting with a digit", map[string]string{"1A": "c"}, false},
		{"a name gpuportal sets", map[string]string{"GPUPORTAL_JOB_ID": "1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := api.SubmitRequest{Name: "env", Team: "vision", GPUs: 1, Command: api.Command{"env"}, Env: tc.env}
			j, fe := validate(u, r, []string{"vision"}, 8)
			if tc.ok {
				if len(fe) != 0 {
					t.Fatalf("refused: %v", fe)
				}
				for k, v := range tc.env {
					if !slices.Contains(j.Env, k+"="+v) {
						t.Errorf("env %v, want %s=%s", j.Env, k, v)
					}
				}
				return
			}
			if fe["env"] == "" {
				t.Errorf("accepted as %v; want env refused", j.Env)
			}
		})
	}
}
