package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestSimMatrix runs `sim matrix` on the 60-job trace and checks the
// table, and that bad input names its flag.
func TestSimMatrix(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"sim", "matrix", "--trace", sixtyJobs + "=1x8,2x8",
		"--placement", "count", "--jitter-copies", "1"}, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"tiresias-g:full-body / tiresias-g:reference",
		"| tiresias-60job.csv | 1x8 | count | 537 / 643 won |",
		"| tiresias-60job.csv | 2x8 | count | 12 / 41 won |",
		"4 cells: 4 won, 0 tied, 0 lost",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--trace is required"},
		{[]string{"--trace", sixtyJobs}, "-trace"},
		{[]string{"--trace", sixtyJobs + "=1x8", "--placement", "spread"}, `--placement "spread"`},
		{[]string{"--trace", sixtyJobs + "=1x8", "--candidate", "nope"}, "--candidate"},
		{[]string{"--trace", sixtyJobs + "=1x8", "--jitter-copies", "-1"}, "--jitter-copies -1"},
		{[]string{"--trace", sixtyJobs + "=1y8"}, "cluster"},
	} {
		err := run(context.Background(), append([]string{"sim", "matrix"}, c.args...), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("sim matrix %v: error %v, want one naming %q", c.args, err, c.want)
		}
	}
}
