package templates

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestAccountingCountsInTheSingular: one job started and one run
// preempted read so, not "1 jobs", "1 runs" (audit3).
func TestAccountingCountsInTheSingular(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want []string
	}{
		{1, []string{"1 job started", "1 run preempted"}},
		{2, []string{"2 jobs started", "2 runs preempted"}},
	} {
		a := Accounting{Total: AccountingRow{Started: tc.n, Preempted: tc.n}}
		var b bytes.Buffer
		if err := AccountingPage(Page{Title: "Accounting"}, a).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(b.String()), " ")
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("%d: the page does not say %q", tc.n, w)
			}
		}
	}
}
