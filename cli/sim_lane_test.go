package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimCommandLanePolicy: two 600-milli pods share one lane of one GPU
// (core/sim's TestLanePolicyGolden, "a short job joins a long one"):
// pack keeps the first on, srtf and fair let the short one run first.
func TestSimCommandLanePolicy(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "lane-openb.csv")
	csv := "name,num_gpu,gpu_milli,creation_time,scheduled_time,deletion_time\n" +
		"a,1,600,0,0,300\n" +
		"b,1,600,100,100,150\n"
	if err := os.WriteFile(trace, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		flags  []string
		policy string
		avg    float64
	}{
		{nil, "fair", (350 + 50) / 2.0},
		{[]string{"--lane-policy", "pack"}, "pack", (300 + 250) / 2.0},
		{[]string{"--lane-policy", "fair"}, "fair", (350 + 50) / 2.0},
		{[]string{"--lane-policy", "SRTF"}, "srtf", (350 + 50) / 2.0},
	}
	for _, tc := range tests {
		name := strings.Join(tc.flags, " ")
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"sim", "--trace", trace, "--format", "openb", "--cluster", "1x1x16",
				"--policy", "fjf", "--sharing", "salus", "--json"}, tc.flags...)
			if err := run(context.Background(), args, &out, &errOut); err != nil {
				t.Fatalf("%v\n%s", err, errOut.String())
			}
			var rows []struct {
				AvgJCT     float64 `json:"avg_jct_s"`
				LanePolicy string  `json:"lane_policy"`
			}
			if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 1 {
				t.Fatalf("--json: %v\n%s", err, out.String())
			}
			if r := rows[0]; r.LanePolicy != tc.policy || math.Abs(r.AvgJCT-tc.avg) > 1e-6 {
				t.Fatalf("lane policy %q, avg JCT %v; want %q, %v", r.LanePolicy, r.AvgJCT, tc.policy, tc.avg)
			}
		})
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"sim", "--trace", trace, "--format", "openb", "--cluster", "1x1x16",
		"--sharing", "salus", "--lane-policy", "lifo"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "--lane-policy") {
		t.Fatalf("--lane-policy lifo: %v, want an error naming the flag", err)
	}
}

// TestSimCommandSharePlacement: two 600-milli pods on two GPUs.
// free-first gives the second its own GPU; fullest-first has it join the
// first one's lane, where fair turns stretch the first (as in
// TestSimCommandLanePolicy's one GPU).
func TestSimCommandSharePlacement(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "place-openb.csv")
	csv := "name,num_gpu,gpu_milli,creation_time,scheduled_time,deletion_time\n" +
		"a,1,600,0,0,300\n" +
		"b,1,600,100,100,150\n"
	if err := os.WriteFile(trace, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		flags       []string
		placement   string
		avg         float64
		coLocations int
	}{
		{nil, "free-first", (300 + 50) / 2.0, 0},
		{[]string{"--share-placement", "fullest-first"}, "fullest-first", (350 + 50) / 2.0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.placement, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append([]string{"sim", "--trace", trace, "--format", "openb", "--cluster", "1x2x16",
				"--policy", "fjf", "--sharing", "salus", "--json"}, tc.flags...)
			if err := run(context.Background(), args, &out, &errOut); err != nil {
				t.Fatalf("%v\n%s", err, errOut.String())
			}
			var rows []struct {
				AvgJCT         float64 `json:"avg_jct_s"`
				SharePlacement string  `json:"share_placement"`
				CoLocations    int     `json:"co_locations"`
			}
			if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 1 {
				t.Fatalf("--json: %v\n%s", err, out.String())
			}
			r := rows[0]
			if r.SharePlacement != tc.placement || math.Abs(r.AvgJCT-tc.avg) > 1e-6 || r.CoLocations != tc.coLocations {
				t.Fatalf("%+v; want placement %q, avg JCT %v, %d co-locations", r, tc.placement, tc.avg, tc.coLocations)
			}
		})
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"sim", "--trace", trace, "--format", "openb", "--cluster", "1x2x16",
		"--sharing", "salus", "--share-placement", "emptiest"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "--share-placement") {
		t.Fatalf("--share-placement emptiest: %v, want an error naming the flag", err)
	}
}
