package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/api"
)

// TestAccountingFlags: a bad flag is an error naming it, before any
// request.
func TestAccountingFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--from", "2026-13-01"}, "--from"},
		{[]string{"--to", "yesterday"}, "--to"},
		{[]string{"--by", "node"}, "--by"},
		{[]string{"--period", "week"}, "--period"},
		{[]string{"--csv", "--json"}, "--csv and --json"},
		{[]string{"nlp"}, "unexpected argument"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			c := jobCmd{getenv: func(string) string { return "" }, now: time.Now, stdout: &out, stderr: &errOut,
				configDir: func() (string, error) { return t.TempDir(), nil }}
			err := c.execute(context.Background(), append([]string{"accounting"}, tc.args...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestPrintAccounting: one line per row and a total, outcomes by name.
func TestPrintAccounting(t *testing.T) {
	var b bytes.Buffer
	rep := api.Accounting{From: "2026-11-01", To: "2026-11-30", By: "team", Period: "range", Scope: "cluster", IdleBelowPct: 5,
		Rows: []api.AccountingRow{
			{Period: "2026-11-01", Team: "nlp", AllocatedGPUHours: 10, UsedGPUHours: 4, IdleGPUHours: 6, Jobs: map[string]int{"succeeded": 3, "timed_out": 1}},
			{Period: "2026-11-01", Team: "vision", AllocatedGPUHours: 2, UsedGPUHours: 2},
		},
		Total: api.AccountingRow{AllocatedGPUHours: 12, UsedGPUHours: 6, IdleGPUHours: 6, Jobs: map[string]int{"succeeded": 3, "timed_out": 1}}}
	if err := printAccounting(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Accounting of the cluster from 2026-11-01 to 2026-11-30", "ALLOC GPU-H", "nlp", "10.00", "40%",
		"3 succeeded, 1 timed_out", "TOTAL", "12.00"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}
