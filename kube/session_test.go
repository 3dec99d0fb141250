package kube

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/job"
)

func TestSessionPod(t *testing.T) {
	base := "/sessions/7/s3cret/"
	for _, tc := range []struct {
		name     string
		s        job.Spec
		port     int
		argv     []string // in the command, in order
		env      string   // one of the variables
		wantErr  string
		keepsCmd bool
	}{
		{name: "jupyter", s: job.Spec{Session: &job.Session{Type: job.SessionJupyter, BaseURL: base, Token: "tok"}},
			port: SessionPort, argv: []string{"jupyter-lab", "--ip=0.0.0.0", "--port=8888", "--ServerApp.base_url=" + base}, env: "JUPYTER_TOKEN=tok"},
		{name: "web with its port", s: job.Spec{Command: []string{"tensorboard", "--port", "6006"}, Session: &job.Session{Type: job.SessionWeb, Port: 6006, BaseURL: base, Token: "tok"}},
			port: 6006, keepsCmd: true, env: "GPUPORTAL_BASE_URL=" + base},
		{name: "web on $PORT", s: job.Spec{Command: []string{"app"}, Session: &job.Session{Type: job.SessionWeb, BaseURL: base, Token: "tok"}},
			port: SessionPort, keepsCmd: true, env: "PORT=8888"},
		{name: "terminal", s: job.Spec{Session: &job.Session{Type: job.SessionTerminal}}, wantErr: "terminal sessions do not run on Kubernetes"},
		{name: "web without a command", s: job.Spec{Session: &job.Session{Type: job.SessionWeb}}, wantErr: "without a command"},
		{name: "bad port", s: job.Spec{Command: []string{"x"}, Session: &job.Session{Type: job.SessionWeb, Port: 70000}}, wantErr: "session port 70000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, env, port, err := sessionPod(tc.s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if port != tc.port {
				t.Errorf("port %d, want %d", port, tc.port)
			}
			if tc.keepsCmd != (cmd == nil) {
				t.Errorf("command %q: the job's own kept: %v", cmd, tc.keepsCmd)
			}
			for _, a := range tc.argv {
				if !slices.Contains(cmd, a) {
					t.Errorf("command %q lacks %q", cmd, a)
				}
			}
			if !slices.Contains(env, tc.env) {
				t.Errorf("env %q lacks %q", env, tc.env)
			}
			for _, kv := range env {
				if strings.Contains(strings.Join(cmd, " "), "tok") {
					t.Errorf("the token is on the command line %q (%s)", cmd, kv)
				}
			}
		})
	}
}

func TestSessionPodSpec(t *testing.T) {
	s := job.Spec{JobID: 7, Run: 1, Session: &job.Session{Type: job.SessionJupyter, BaseURL: "/sessions/7/x/", Token: "tok"}}
	p := newPod(podSpec{prefix: "gp", namespace: "jobs", image: "img", node: "n1", env: []string{"PORT=1", "A=b"}}, s, []int{0})
	c := p.Spec.Containers[0]
	if p.Annotations[AnnotationSessionPort] != "8888" || len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8888 {
		t.Errorf("session port: annotation %q, ports %v", p.Annotations[AnnotationSessionPort], c.Ports)
	}
	if p.Annotations[AnnotationSimDuration] != "" {
		t.Errorf("a session is no simulated job: %v", p.Annotations)
	}
	// The session's PORT comes after (and wins over) a job's own.
	var last string
	for _, e := range c.Env {
		if e.Name == "PORT" {
			last = e.Value
		}
	}
	if last != "8888" {
		t.Errorf("PORT=%s last, want 8888", last)
	}
}
