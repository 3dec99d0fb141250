package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
)

func TestSubmitSharingRejects(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	tests := []struct {
		name, body, field string
	}{
		{"sharing needs one GPU", `{"name":"s","gpus":2,"sim":{"duration_s":60},"sharing":true,"mem_persistent_mib":1000,"mem_ephemeral_mib":4000}`, "sharing"},
		{"fraction at 1", `{"name":"s","sim":{"duration_s":60},"gpu_fraction":1}`, "gpu_fraction"},
		{"negative fraction", `{"name":"s","gpus":1,"sim":{"duration_s":60},"gpu_fraction":-0.5}`, "gpu_fraction"},
		{"fraction of two GPUs", `{"name":"s","gpus":2,"sim":{"duration_s":60},"gpu_fraction":0.5}`, "gpu_fraction"},
		{"sharing without an estimate", `{"name":"s","gpus":1,"sim":{"duration_s":60},"sharing":true}`, "sharing"},
		{"catalogue model without a batch size", `{"name":"s","gpus":1,"sim":{"duration_s":60},"sharing":true,"model":"vgg16"}`, "sharing"},
		{"negative persistent memory", `{"name":"s","gpus":1,"sim":{"duration_s":60},"sharing":true,"mem_persistent_mib":-1,"mem_ephemeral_mib":10}`, "mem_persistent_mib"},
		{"ephemeral memory beyond any GPU", `{"name":"s","gpus":1,"sim":{"duration_s":60},"sharing":true,"mem_persistent_mib":1,"mem_ephemeral_mib":99999999}`, "mem_ephemeral_mib"},
		{"negative batch size", `{"name":"s","gpus":1,"sim":{"duration_s":60},"sharing":true,"model":"vgg16","batch_size":-4}`, "batch_size"},
		{"negative parameters", `{"name":"s","gpus":1,"sim":{"duration_s":60},"sharing":true,"parameters":-4,"batch_size":4}`, "parameters"},
		{"fraction is not a number", `{"name":"s","gpus":1,"sim":{"duration_s":60},"gpu_fraction":"half"}`, "gpu_fraction"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", tc.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			var e struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(e.Error, tc.field) {
				t.Fatalf("error %q does not name %s", e.Error, tc.field)
			}
		})
	}
}

func TestSubmitSharingStores(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	tests := []struct {
		name, body string
		fraction   float64
		p, e       int64
		source     string
	}{
		{"declared", `{"name":"s","gpus":1,"sim":{"duration_s":60},"sharing":true,"mem_persistent_mib":1000,"mem_ephemeral_mib":4000}`, 0, 1000, 4000, "declared"},
		// VGG-16 at batch 50: the catalogue's figures from salus-memory.csv.
		{"catalogue", `{"name":"s","gpus":1,"sim":{"duration_s":60},"sharing":true,"model":"vgg16","batch_size":50}`, 0, 1587, 8158, "catalogue"},
		// 100 M parameters: P = 16 B each; E = 4.5 B each per sample.
		{"parameter count", `{"name":"s","gpus":1,"sim":{"duration_s":60},"sharing":true,"parameters":100000000,"batch_size":2}`, 0, 1526, 859, "params"},
		{"a fraction alone, gpus left out", `{"name":"s","sim":{"duration_s":60},"gpu_fraction":0.25}`, 0.25, 0, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", tc.body)
			if rec.Code != http.StatusCreated {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var j api.Job
			if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
				t.Fatal(err)
			}
			if !j.Sharing || j.GPUs != 1 || j.GPUFraction != tc.fraction {
				t.Fatalf("job %+v: want sharing, 1 GPU, fraction %g", j, tc.fraction)
			}
			est := j.MemoryEstimate
			switch {
			case tc.source == "" && est != nil:
				t.Fatalf("estimate %+v, want none", est)
			case tc.source != "" && (est == nil || est.PersistentMiB != tc.p || est.EphemeralMiB != tc.e || est.Source != tc.source):
				t.Fatalf("estimate %+v, want P %d E %d from %s", est, tc.p, tc.e, tc.source)
			}
			// The job's page says so.
			page := ts.do(t, "alice", http.MethodGet, "/jobs/"+itoa(j.ID), "")
			if !strings.Contains(page.Body.String(), `id="job-sharing"`) {
				t.Fatalf("the job page does not show sharing")
			}
		})
	}
}

func itoa(id int64) string { b, _ := json.Marshal(id); return string(b) }
