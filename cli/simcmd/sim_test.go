package simcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestCommandAlone runs the command as gpuportal-sim does, with no
// database: a replay works, and --from-db is refused by name.
func TestCommandAlone(t *testing.T) {
	const sixtyJobs = "../../testdata/traces/tiresias-60job.csv"
	tests := []struct {
		name    string
		args    []string
		wantErr string // empty: succeeds
		rows    int
	}{
		{name: "replay", args: []string{"--trace", sixtyJobs, "--cluster", "2x8", "--policy", "fifo,tiresias-l", "--json"}, rows: 2},
		{name: "from-db", args: []string{"--from-db"}, wantErr: "--from-db"},
		{name: "from-db flag without it", args: []string{"--trace", sixtyJobs, "--cluster", "2x8", "--days", "3"}, wantErr: "--days needs --from-db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := Command(&out, &errOut, nil)
			cmd.SetArgs(tc.args)
			cmd.SetOut(&out)
			cmd.SetErr(&errOut)
			cmd.SilenceUsage = true
			err := cmd.ExecuteContext(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("sim: %v\n%s", err, errOut.String())
			}
			var rows []struct {
				Policy   string `json:"policy"`
				Finished int    `json:"finished"`
			}
			if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
				t.Fatalf("--json: %v\n%s", err, out.String())
			}
			if len(rows) != tc.rows {
				t.Fatalf("%d rows, want %d: %+v", len(rows), tc.rows, rows)
			}
			for _, r := range rows {
				if r.Finished != 60 {
					t.Errorf("%s finished %d of 60 jobs", r.Policy, r.Finished)
				}
			}
		})
	}
}
