package web

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestCapFormShowsTheCaps: the team page's "Cap a member" form says each
// member's cap now and does not offer 0, which removes the cap, as the
// value to save. It used to show "Most GPUs at once: 0" whatever the
// caps were (an audit, as lead, with alice capped at 2): one click on
// "Set cap" without reading removed her cap.
func TestCapFormShowsTheCaps(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	if rec := ts.do(t, "lead", http.MethodPut, "/api/v1/teams/vision/caps/alice", `{"max_gpus": 2}`); rec.Code != http.StatusOK {
		t.Fatalf("cap alice: %d %s", rec.Code, rec.Body)
	}
	rec := ts.do(t, "lead", http.MethodGet, "/teams/vision", "")
	body := rec.Body.String()
	i := strings.Index(body, "Cap a member")
	if rec.Code != http.StatusOK || i < 0 {
		t.Fatalf("team page: %d, cap form found %v", rec.Code, i >= 0)
	}
	form := body[i:]
	form = form[:strings.Index(form, "</form>")]
	for _, want := range []string{">alice · cap 2<", ">lead · no cap<"} {
		if !strings.Contains(form, want) {
			t.Errorf("cap form does not say %q: %s", want, form)
		}
	}
	input := regexp.MustCompile(`<input name="max_gpus"[^>]*>`).FindString(form)
	if strings.Contains(input, `value="0"`) || !strings.Contains(input, "required") {
		t.Errorf("cap input %s: want no value of its own, required", input)
	}
}
