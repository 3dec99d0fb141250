package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// profileView is a CPU and host memory sensitivity profile in the API.
type profileView struct {
	Source string       `json:"source"`
	Family string       `json:"family"`
	CPU    [][2]float64 `json:"cpu"`
	Mem    [][2]float64 `json:"mem"`
}

// cliShown is what "gpuportal job show --json" prints, the parts these
// tests read.
type cliShown struct {
	Job struct {
		ID          int64        `json:"id"`
		State       string       `json:"state"`
		Sharing     bool         `json:"sharing"`
		GPUFraction float64      `json:"gpu_fraction"`
		CPUProfile  *profileView `json:"cpu_profile"`
		Resources   *struct {
			Allocations []allocationView `json:"allocations"`
			Profile     profileView      `json:"profile"`
		} `json:"resources"`
		Lane *struct {
			Node     string  `json:"node"`
			GPU      int     `json:"gpu"`
			Lane     int     `json:"lane"`
			LaneJobs []int64 `json:"lane_jobs"`
			GPUJobs  []int64 `json:"gpu_jobs"`
		} `json:"lane"`
	} `json:"job"`
	History []struct {
		State string `json:"state"`
	} `json:"history"`
}

// show runs "gpuportal job show --json ID" with token and decodes it.
func (c *cli) show(token string, id int64) cliShown {
	c.t.Helper()
	out := c.ok([]string{"GPUPORTAL_TOKEN=" + token}, "job", "show", "--json", strconv.FormatInt(id, 10))
	var s cliShown
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Job.ID != id {
		c.t.Fatalf("job show --json %d printed %q: %v", id, out, err)
	}
	return s
}

// submitted is the job ID in what "gpuportal job submit" prints.
var submitted = regexp.MustCompile(`^job (\d+) submitted: `)

// submitID runs "gpuportal job submit args..." with token and returns the
// new job's ID.
func (c *cli) submitID(token string, args ...string) int64 {
	c.t.Helper()
	out := c.ok([]string{"GPUPORTAL_TOKEN=" + token}, append([]string{"job", "submit"}, args...)...)
	m := submitted.FindStringSubmatch(out)
	if m == nil {
		c.t.Fatalf("job submit %v printed %q", args, out)
	}
	id, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		c.t.Fatal(err)
	}
	return id
}

// Two simulated jobs submitted with the real CLI on serve --cpu-alloc
// synergy, one declaring a catalogue family (--cpu-profile image-cnn),
// one its own CPU curve (--cpu-curve): job show --json gives each profile
// back as declared, both in cpu_profile and in the running job's
// resources, each job gets CPUs allocated, its page says "declared", and
// both finish.
func TestCLIDeclaredProfile(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x2x16", "--cpu-alloc", "synergy")
	alice := newAPI(t, srv.URL, "alice", "dev")
	c := newCLI(t, srv.URL)

	family := c.submitID(alice.token, "--name", "cnn", "--gpus", "1", "--sim-duration", "4s", "--cpu-profile", "image-cnn")
	curve := c.submitID(alice.token, "--name", "curve", "--gpus", "1", "--sim-duration", "4s", "--cpu-curve", "1:0.5,2:0.8,4:1")
	wantCurve := [][2]float64{{1, 0.5}, {2, 0.8}, {4, 1}}

	cases := []struct {
		id     int64
		family string
		cpu    [][2]float64 // nil: the catalogue's, not checked point by point
		page   string
	}{
		{family, "image-cnn", nil, "declared: image-cnn (catalogue)"},
		{curve, "custom", wantCurve, "declared: custom: CPU 1:0.5, 2:0.8, 4:1; memory flat"},
	}
	for _, tc := range cases {
		var s cliShown
		eventually(t, 20*time.Second, fmt.Sprintf("job %d running with its CPUs allocated", tc.id), func() bool {
			s = c.show(alice.token, tc.id)
			return s.Job.State == "running" && s.Job.Resources != nil && len(s.Job.Resources.Allocations) == 1
		})
		p := s.Job.CPUProfile
		if p == nil || p.Source != "declared" || p.Family != tc.family || len(p.CPU) == 0 ||
			(tc.cpu != nil && !slices.Equal(p.CPU, tc.cpu)) {
			t.Errorf("job %d: cpu_profile %+v, want declared %s with CPU curve %v", tc.id, p, tc.family, tc.cpu)
		}
		r := s.Job.Resources
		if r.Profile.Source != "declared" || r.Profile.Family != tc.family || p == nil || !slices.Equal(r.Profile.CPU, p.CPU) {
			t.Errorf("job %d: resources profile %+v, want the declared %s one, %+v", tc.id, r.Profile, tc.family, p)
		}
		if a := r.Allocations[0]; a.CPUMilli <= 0 || a.CPUMilli > 16000 || a.Node != "node-0" {
			t.Errorf("job %d: allocation %+v, want CPUs of node-0's 16 cores", tc.id, a)
		}
		page := jobPage(t, srv.URL, tc.id)
		if want := `id="job-declared-profile">` + tc.page; !strings.Contains(page, want) {
			i := strings.Index(page, "job-declared-profile")
			t.Errorf("job %d's page lacks %q; around the profile: %q", tc.id, want, page[max(i, 0):min(max(i, 0)+200, len(page))])
		}
	}
	for _, id := range []int64{family, curve} {
		alice.waitState(id, 20*time.Second, "succeeded")
	}
}

// A curve whose speed falls is refused: the CLI exits non-zero with a
// message naming the curve, and no job reaches the queue.
func TestCLIFallingCurveRejected(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x16", "--cpu-alloc", "synergy")
	alice := newAPI(t, srv.URL, "alice", "dev")
	c := newCLI(t, srv.URL)
	env := []string{"GPUPORTAL_TOKEN=" + alice.token}

	c.fails(env, []string{"cpu_curve", "point 2: speed 0.4 falls from 0.5", "(HTTP 400)", "Fix --cpu-curve."},
		"job", "submit", "--name", "falls", "--sim-duration", "4s", "--cpu-curve", "1:0.5,2:0.4")
	// Bad syntax never leaves the CLI, and says which flag.
	c.fails(env, []string{"--cpu-curve", `point 2 "2-0.4"`},
		"job", "submit", "--name", "typo", "--sim-duration", "4s", "--cpu-curve", "1:0.5,2-0.4")

	var jobs []jobView
	if st := alice.do(http.MethodGet, "/api/v1/jobs", nil, &jobs); st != http.StatusOK || len(jobs) != 0 {
		t.Errorf("GET /api/v1/jobs: status %d, %d jobs %+v: want none submitted", st, len(jobs), jobs)
	}
	if out := c.ok(env, "job", "list"); !strings.Contains(out, "no jobs") {
		t.Errorf("job list after the refusals: %q", out)
	}
}

// Two jobs submitted with the real CLI's --share --gpu-fraction 0.25 on a
// server with one simulated GPU run together on it: job show --json
// gives each the same GPU's lane and names the other, GET /api/v1/gpus
// has both in that GPU's lanes, and both succeed.
func TestCLISharingColocates(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x1x16", "--cpu-alloc", "synergy", "--dev-token", "test-dev-token")
	alice := newAPI(t, srv.URL, "alice", "dev")
	admin := &api{t: t, base: srv.URL, token: "test-dev-token"}
	c := newCLI(t, srv.URL)

	var ids []int64
	for i := range 2 {
		ids = append(ids, c.submitID(alice.token, "--name", fmt.Sprintf("quarter-%d", i),
			"--sim-duration", "5s", "--share", "--gpu-fraction", "0.25"))
	}
	shown := map[int64]cliShown{}
	eventually(t, 20*time.Second, "both jobs running in a lane", func() bool {
		for _, id := range ids {
			s := c.show(alice.token, id)
			if s.Job.State != "running" || s.Job.Lane == nil {
				return false
			}
			shown[id] = s
		}
		return true
	})
	for i, id := range ids {
		j := shown[id].Job
		other := ids[1-i]
		if !j.Sharing || j.GPUFraction != 0.25 {
			t.Errorf("job %d: sharing %v, fraction %v: want 0.25 of a GPU", id, j.Sharing, j.GPUFraction)
		}
		if l := j.Lane; l.Node != "node-0" || l.GPU != 0 || !slices.Contains(append(l.LaneJobs, l.GPUJobs...), other) {
			t.Errorf("job %d's lane %+v: want node-0 GPU 0, with job %d beside it or in turns", id, l, other)
		}
	}
	var gpus []gpuLanes
	if st := admin.do(http.MethodGet, "/api/v1/gpus", nil, &gpus); st != http.StatusOK || len(gpus) != 1 {
		t.Fatalf("GET /api/v1/gpus: status %d, %d GPUs: want the one", st, len(gpus))
	}
	if got := gpus[0].laneJobs(); !slices.Contains(got, ids[0]) || !slices.Contains(got, ids[1]) {
		t.Errorf("GPU %s/%d lanes hold %v: want both jobs %v", gpus[0].Node, gpus[0].Index, got, ids)
	}
	for _, id := range ids {
		alice.waitState(id, 30*time.Second, "succeeded")
	}
	if s := c.show(alice.token, ids[0]); s.Job.State != "succeeded" || s.Job.Lane != nil {
		t.Errorf("job %d after it ended: state %s, lane %+v", ids[0], s.Job.State, s.Job.Lane)
	}
}
