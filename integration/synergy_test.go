package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// allocationView is a job's CPUs and memory on one node in the API.
type allocationView struct {
	Node         string `json:"node"`
	CPUMilli     int64  `json:"cpu_milli"`
	MemMiB       int64  `json:"mem_mib"`
	PropCPUMilli int64  `json:"prop_cpu_milli"`
	UsedCPUMilli *int64 `json:"used_cpu_milli"`
	UsedMemMiB   *int64 `json:"used_mem_mib"`
	Note         string `json:"note"`
}

// An image model and a language model share a node of serve --dev
// --cpu-alloc synergy (2 GPUs, 16 cores): the scheduler gives the image
// job more than its proportional 8 cores (up to where its curve stops
// rising, 12) and the language job less (1), the
// API shows each job's allocation, its use (simulated) and its profile,
// the job page shows them, and the node API the node's total.
func TestSynergyAllocation(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x2x16", "--cpu-alloc", "synergy", "--dev-token", "test-dev-token")
	alice := newAPI(t, srv.URL, "alice", "dev")
	admin := &api{t: t, base: srv.URL, token: "test-dev-token"}
	ids := map[string]int64{}
	for _, model := range []string{"resnet50", "bert-base"} {
		var j struct {
			ID int64 `json:"id"`
		}
		st := alice.do(http.MethodPost, "/api/v1/jobs", map[string]any{
			"name": model, "gpus": 1, "model": model, "sim": map[string]any{"duration_s": 60}}, &j)
		if st != http.StatusCreated {
			t.Fatalf("submit %s: status %d", model, st)
		}
		ids[model] = j.ID
	}
	type jobRes struct {
		State     string `json:"state"`
		Resources *struct {
			Allocations []allocationView `json:"allocations"`
			Profile     struct {
				Source string `json:"source"`
				Family string `json:"family"`
			} `json:"profile"`
		} `json:"resources"`
	}
	got := map[string]jobRes{}
	eventually(t, 30*time.Second, "both jobs running with their allocation and use", func() bool {
		for model, id := range ids {
			var j jobRes
			if alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j) != http.StatusOK {
				return false
			}
			if j.State != "running" || j.Resources == nil || len(j.Resources.Allocations) != 1 || j.Resources.Allocations[0].UsedCPUMilli == nil {
				return false
			}
			got[model] = j
		}
		return true
	})
	img, lang := got["resnet50"].Resources, got["bert-base"].Resources
	if a := img.Allocations[0]; a.PropCPUMilli != 8000 || a.CPUMilli <= 8000 || img.Profile.Family != "image-cnn" {
		t.Errorf("resnet50: %+v, profile %+v: want more than its proportional 8 cores", a, img.Profile)
	}
	if a := lang.Allocations[0]; a.CPUMilli >= 8000 || lang.Profile.Family != "language" || lang.Profile.Source != "catalogue" {
		t.Errorf("bert: %+v, profile %+v: want less than its proportional 8 cores", a, lang.Profile)
	}
	if u := img.Allocations[0].UsedCPUMilli; *u <= 0 || *u > img.Allocations[0].CPUMilli {
		t.Errorf("resnet50 uses %d of %d milli-CPUs: want a plausible simulated use", *u, img.Allocations[0].CPUMilli)
	}
	if page := jobPage(t, srv.URL, ids["resnet50"]); !strings.Contains(page, "CPUs and memory on node-0") || !strings.Contains(page, "job-profile") {
		t.Errorf("job page lacks the CPUs and memory or the profile chart")
	}
	var nodes []struct {
		Name string `json:"name"`
		CPU  int64  `json:"cpu_allocated_milli"`
	}
	sum := img.Allocations[0].CPUMilli + lang.Allocations[0].CPUMilli
	if admin.do(http.MethodGet, "/api/v1/nodes", nil, &nodes) != http.StatusOK || len(nodes) != 1 || nodes[0].CPU != sum || sum > 16000 {
		t.Errorf("nodes %+v: want node-0 with the jobs' %d milli-CPUs allocated, at most its 16 cores", nodes, sum)
	}
}
