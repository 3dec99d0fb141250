package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

// TestJobResourcesShown: a running job's JSON carries its allocated and
// used CPUs and memory and its profile, its page shows them with the
// profile chart, and the node's JSON and the cluster page its totals.
func TestJobResourcesShown(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	ctx := context.Background()
	a, err := agent.New(agent.Config{Name: "n0", Backend: gpu.NewSim("n0", 2, 16384), WorkDir: t.TempDir(),
		CPUs: 16, MemMiB: 64 << 10}, ts.engine.Exits())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown(context.Background()) })
	if err := ts.engine.AddNode(ctx, a); err != nil {
		t.Fatal(err)
	}
	j := &models.Job{Name: "r", Team: "vision", User: "alice", GPUs: 1, Model: "resnet50", SimDuration: 600, SubmittedAt: time.Now()}
	if err := ts.store.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	var got api.Job
	for deadline := time.Now().Add(10 * time.Second); ; {
		ts.engine.Wake()
		rec := ts.do(t, "alice", http.MethodGet, "/api/v1/jobs/"+itoa(j.ID), "")
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("%v: %s", err, rec.Body)
		}
		// The allocation shows as soon as the job starts; its use once
		// its agent runs it.
		if got.State == job.Running && got.Resources != nil && len(got.Resources.Allocations) > 0 &&
			got.Resources.Allocations[0].UsedCPUMilli != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not running with resources after 10 s: %+v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := got.Resources
	if len(r.Allocations) != 1 {
		t.Fatalf("allocations %+v", r.Allocations)
	}
	al := r.Allocations[0]
	// One of two GPUs: half the node's 16 cores and 64 GiB.
	if al.Node != "n0" || al.GPUs != 1 || al.CPUMilli != 8000 || al.MemMiB != 32<<10 || al.PropCPUMilli != 8000 {
		t.Errorf("allocation %+v: want the proportional half of n0", al)
	}
	if al.UsedCPUMilli == nil || *al.UsedCPUMilli <= 0 || *al.UsedCPUMilli > al.CPUMilli || al.Enforced {
		t.Errorf("used %v of %d: want the simulated job's plausible use, unenforced", al.UsedCPUMilli, al.CPUMilli)
	}
	if r.Profile.Source != "catalogue" || r.Profile.Family != "image-cnn" || len(r.Profile.CPU) == 0 {
		t.Errorf("profile %+v: want the catalogue's image-cnn curve", r.Profile)
	}
	page := ts.do(t, "alice", http.MethodGet, "/jobs/"+itoa(j.ID), "").Body.String()
	for _, want := range []string{"CPUs and memory on n0", "allocated 8.0 cores, 32.0 GiB", `id="job-profile"`, "catalogue, image-cnn"} {
		if !strings.Contains(page, want) {
			t.Errorf("job page lacks %q", want)
		}
	}
	var nodes []api.Node
	if err := json.Unmarshal(ts.do(t, "admin", http.MethodGet, "/api/v1/nodes", "").Body.Bytes(), &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].CPUAllocatedMilli != 8000 || nodes[0].MemAllocatedMiB != 32<<10 {
		t.Errorf("nodes %+v: want n0 with 8 cores and 32 GiB allocated", nodes)
	}
	if c := ts.do(t, "admin", http.MethodGet, "/cluster", "").Body.String(); !strings.Contains(c, "CPUs 8.0 of 16 allocated · memory 32.0 of 64.0 GiB · 1 job") {
		t.Errorf("cluster page lacks the node's allocation")
	}
}
