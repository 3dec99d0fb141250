package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
)

// TestSubmitImage: a job may name a container image; a malformed one, one
// without a command, or one outside the server's allowed prefixes gets a
// 400 naming the image field; an allowed one is stored and shown.
func TestSubmitImage(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, func(c *testConfig) { c.App.AllowedImages = job.ImagePrefixes{"localhost/", "registry.lab/"} })
	tests := []struct {
		name, body string
		status     int
		err        string // the error's start, for a 400
	}{
		{"allowed", `{"name":"c","gpus":1,"command":["id","-un"],"image":"localhost/train:1"}`, http.StatusCreated, ""},
		{"another allowed registry", `{"name":"c","gpus":1,"command":"python train.py","image":"registry.lab/team/pytorch:2.3"}`, http.StatusCreated, ""},
		{"a registry not allowed", `{"name":"c","gpus":1,"command":["true"],"image":"docker.io/library/busybox"}`, http.StatusBadRequest, `image: "docker.io/library/busybox" is not allowed here`},
		{"a short name resolves elsewhere", `{"name":"c","gpus":1,"command":["true"],"image":"busybox"}`, http.StatusBadRequest, "image: "},
		{"an option, not an image", `{"name":"c","gpus":1,"command":["true"],"image":"--privileged"}`, http.StatusBadRequest, "image: "},
		{"a simulated job has no image", `{"name":"c","gpus":1,"sim":{"duration_s":9},"image":"localhost/train:1"}`, http.StatusBadRequest, "image: needs a command"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", tc.body)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.status != http.StatusCreated {
				var e struct{ Error string }
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(e.Error, tc.err) {
					t.Fatalf("error %q, want it to start with %q", e.Error, tc.err)
				}
				return
			}
			var j api.Job
			if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
				t.Fatal(err)
			}
			var body struct{ Image string }
			_ = json.Unmarshal([]byte(tc.body), &body)
			if j.Image != body.Image {
				t.Errorf("stored image %q, want %q", j.Image, body.Image)
			}
		})
	}
}
