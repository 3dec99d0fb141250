package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

const mixed40 = "../core/sim/synergysim/testdata/mixed40.csv"

// TestSimCPUAlloc runs `gpuportal sim --cpu-alloc` in both modes on the
// native mixed trace: synergy is faster than proportional, proportional
// keeps every job at speed 1, and the table shows the CPU figures.
func TestSimCPUAlloc(t *testing.T) {
	type cpu struct {
		Mode      string  `json:"mode"`
		Allocated float64 `json:"cpu_allocated"`
		Useful    float64 `json:"cpu_useful"`
		Speedup   float64 `json:"avg_speedup"`
	}
	jct := map[string]float64{}
	for _, mode := range []string{"proportional", "synergy"} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"sim", "--trace", mixed40, "--cluster", "2x8",
			"--policy", "fjf", "--cpu-alloc", mode, "--json"}, &out, &errOut)
		if err != nil {
			t.Fatalf("sim --cpu-alloc %s: %v\n%s", mode, err, errOut.String())
		}
		var rows []struct {
			AvgJCT float64 `json:"avg_jct_s"`
			CPU    *cpu    `json:"cpu"`
		}
		if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
			t.Fatalf("--json: %v\n%s", err, out.String())
		}
		if len(rows) != 1 || rows[0].CPU == nil || rows[0].CPU.Mode != mode {
			t.Fatalf("%s: rows %s", mode, out.String())
		}
		c := rows[0].CPU
		if !(c.Allocated > 0 && c.Allocated <= 1 && c.Useful > 0 && c.Useful <= c.Allocated+1e-9) {
			t.Errorf("%s: CPU figures out of range: %+v", mode, c)
		}
		if mode == "proportional" && c.Speedup != 1 {
			t.Errorf("proportional speedup %v, want 1", c.Speedup)
		}
		jct[mode] = rows[0].AvgJCT
	}
	if !(jct["synergy"] < jct["proportional"]) {
		t.Errorf("avg JCT: synergy %v, proportional %v: want synergy faster", jct["synergy"], jct["proportional"])
	}

	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"sim", "--trace", mixed40, "--cluster", "1x8",
		"--policy", "fjf", "--cpu-alloc", "synergy"}, &out, &errOut); err != nil {
		t.Fatalf("table: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "cpu alloc") || !strings.Contains(out.String(), "synergy") {
		t.Errorf("table has no CPU section:\n%s", out.String())
	}
}

func TestSimCPUAllocErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cpu-alloc", "greedy"}, "--cpu-alloc \"greedy\""},
		{[]string{"--cpu-alloc", "synergy", "--placement", "count"}, "--cpu-alloc needs --placement nodes"},
	} {
		args := append([]string{"sim", "--trace", mixed40, "--cluster", "1x8"}, tc.args...)
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
