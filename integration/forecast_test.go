package integration

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	apitypes "github.com/gpuportal/gpuportal/api"
)

// TestForecastEverywhere: a waiting job's start forecast appears in its
// JSON, on its page, in the jobs list, on the queues page and in the
// CLI (job show, job list --start, squeue --start), and all say the
// same; a job its user's cap forbids says so everywhere instead of
// promising a start.
func TestForecastEverywhere(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--data", t.TempDir(), "--sim-gpus", "1x2x80")
	admin := newAPI(t, srv.URL, "admin", "dev")
	bob := newAPI(t, srv.URL, "bob", "dev")
	alice := newAPI(t, srv.URL, "alice", "dev")
	b := newBrowser(t, srv.URL)
	b.login("admin", "dev")
	cl := newCLI(t, srv.URL)
	cliEnv := []string{"GPUPORTAL_TOKEN=" + admin.token}

	submit := func(a *api, name string, gpus int, seconds float64) int64 {
		t.Helper()
		var j jobView
		body := map[string]any{"name": name, "gpus": gpus, "sim": map[string]any{"duration_s": seconds}}
		if st := a.do(http.MethodPost, "/api/v1/jobs", body, &j); st != http.StatusCreated {
			t.Fatalf("submit %s: status %d", name, st)
		}
		return j.ID
	}
	// Run times to learn from: three short jobs.
	for i := range 3 {
		id := submit(bob, fmt.Sprintf("warmup-%d", i), 1, 1)
		bob.waitState(id, 60*time.Second, "succeeded")
	}
	blocker := submit(bob, "blocker", 2, 600)
	bob.waitState(blocker, 30*time.Second, "running")
	waiter := submit(bob, "waiter", 2, 10)
	if st := admin.do(http.MethodPut, "/api/v1/teams/vision/caps/alice", map[string]any{"max_gpus": 1}, nil); st != http.StatusOK {
		t.Fatalf("set alice's cap: status %d", st)
	}
	capped := submit(alice, "capped", 2, 10)

	forecastOf := func(id int64) *apitypes.Forecast {
		var j apitypes.Job
		if st := admin.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j); st != http.StatusOK {
			t.Fatalf("GET job %d: status %d", id, st)
		}
		return j.Forecast
	}
	eventually(t, 30*time.Second, "forecasts of the waiting and the capped job", func() bool {
		w, c := forecastOf(waiter), forecastOf(capped)
		return w != nil && w.State == apitypes.ForecastExpected && c != nil && c.State == apitypes.ForecastNever
	})

	// The capped job says why, never when.
	c := forecastOf(capped)
	wantCap := "cannot start while the cap of user alice in team vision is 1 GPU: it needs 2"
	if c.Reason != wantCap || c.Earliest != nil || c.Likely != nil || c.Latest != nil {
		t.Errorf("capped job's forecast %+v; want never, %q, no times", c, wantCap)
	}

	// Every place shows one forecast: read them all between two reads of
	// the API that found the same forecast.
	agreed := false
	for attempt := 0; attempt < 10 && !agreed; attempt++ {
		before := forecastOf(waiter)
		now := time.Now()
		_, page := b.get(fmt.Sprintf("/jobs/%d", waiter))
		_, cappedPage := b.get(fmt.Sprintf("/jobs/%d", capped))
		_, rows := b.get("/jobs/rows?scope=all")
		_, queues := b.get("/queues/live")
		show := cl.ok(cliEnv, "job", "show", fmt.Sprint(waiter))
		showCapped := cl.ok(cliEnv, "job", "show", fmt.Sprint(capped))
		start := cl.ok(cliEnv, "job", "list", "--start", "--scope", "all")
		squeue := cl.ok(cliEnv, "squeue", "--start", "-h", "-o", "%i %S %Y")
		var startJSON []apitypes.Job
		if err := json.Unmarshal([]byte(cl.ok(cliEnv, "job", "list", "--start", "--scope", "all", "--json")), &startJSON); err != nil {
			t.Fatal(err)
		}
		var q apitypes.Queues
		admin.do(http.MethodGet, "/api/v1/queues", nil, &q)
		after := forecastOf(waiter)
		end := time.Now()
		if before.MadeAt == nil || after.MadeAt == nil || !before.MadeAt.Equal(*after.MadeAt) {
			continue // a new forecast came meanwhile
		}
		agreed = true
		f := before
		// Each place renders the forecast at its own moment between now
		// and end: a range that closes within 2 s of it reads "now" there
		// (api.Forecast.Short), so either rendering is the same forecast.
		// The blocker's remaining time is drawn from 1-second warm-up jobs,
		// so its range is often seconds away, and a loaded machine's reads
		// take that long.
		short, shortEnd := f.Short(now, time.Local), f.Short(end, time.Local)
		// The sentence's times, without its relative part ("in 3m").
		text := f.Text(now, time.Local)
		absolute, _, _ := strings.Cut(text, " (")
		absoluteEnd, _, _ := strings.Cut(f.Text(end, time.Local), " (")
		t.Logf("waiting job %d: %s; ETA %s (%s by the last read)", waiter, text, short, shortEnd)

		if got := pageText(page, `id="job-estimate">`); !strings.HasPrefix(got, absolute) && !strings.HasPrefix(got, absoluteEnd) {
			t.Errorf("job page says %q; the API's forecast reads %q", got, absolute)
		}
		if got := etaCell(rows, fmt.Sprintf(`href="/jobs/%d"`, waiter)); got != short && got != shortEnd {
			t.Errorf("jobs list ETA %q; want %q", got, short)
		}
		if got := etaCell(queues, fmt.Sprintf(`data-job="%d"`, waiter)); got != short && got != shortEnd {
			t.Errorf("queues page ETA %q; want %q", got, short)
		}
		if !strings.Contains(show, "expected start:") || !strings.Contains(show, absolute) && !strings.Contains(show, absoluteEnd) {
			t.Errorf("job show lacks %q:\n%s", absolute, show)
		}
		if line := lineOf(start, fmt.Sprint(waiter)); !strings.Contains(line, short) && !strings.Contains(line, shortEnd) {
			t.Errorf("job list --start: %q lacks %q:\n%s", line, short, start)
		}
		if got := queueForecast(q, waiter); got == nil || !sameForecast(got, f) {
			t.Errorf("queues API forecast %+v; want %+v", got, f)
		}
		for _, j := range startJSON {
			if j.ID == waiter && !sameForecast(j.Forecast, f) {
				t.Errorf("job list --start --json forecast %+v; want %+v", j.Forecast, f)
			}
		}

		// The capped job: never, with its reason, everywhere.
		if got := pageText(cappedPage, `id="job-estimate">`); !strings.HasPrefix(got, "never: "+wantCap) {
			t.Errorf("capped job's page says %q", got)
		}
		if got := etaCell(rows, fmt.Sprintf(`href="/jobs/%d"`, capped)); got != "never" {
			t.Errorf("capped job's ETA in the jobs list %q; want never", got)
		}
		if !strings.Contains(showCapped, "never: "+wantCap) {
			t.Errorf("job show of the capped job lacks its reason:\n%s", showCapped)
		}
		if line := lineOf(start, fmt.Sprint(capped)); !strings.Contains(line, "never") {
			t.Errorf("job list --start: the capped job's line %q says nothing of never", line)
		}
		if !(startKeyIndex(startJSON, waiter) < startKeyIndex(startJSON, capped)) {
			t.Errorf("job list --start lists the capped job before the one with a start")
		}
		// squeue --start: the expected start (the likely one, else the
		// earliest), the capped job's N/A after it.
		wantSqueue := fmt.Sprintf("%d %s (null)\n%d N/A (null)\n", waiter, f.Expected().Local().Format("2006-01-02T15:04:05"), capped)
		if squeue != wantSqueue {
			t.Errorf("squeue --start:\n%s\nwant:\n%s", squeue, wantSqueue)
		}
	}
	if !agreed {
		t.Fatal("no two reads of the API in 10 found the same forecast")
	}

	var st apitypes.ForecastStats
	if code := admin.do(http.MethodGet, "/api/v1/stats/estimates", nil, &st); code != http.StatusOK || st.Latest == nil || st.Latest.Jobs < 2 || st.Range == "" {
		t.Errorf("stats/estimates: status %d, %+v", code, st)
	}
	// Once the blocker is gone, the waiting job starts and its first
	// forecast is checked against the start.
	admin.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", blocker), nil, nil)
	bob.waitState(waiter, 60*time.Second, "running", "succeeded")
	eventually(t, 30*time.Second, "the waiting job's forecast in the calibration", func() bool {
		admin.do(http.MethodGet, "/api/v1/stats/estimates", nil, &st)
		// Its first forecast as recorded, a range or unknown (shown
		// before the forecaster had a sample), is counted either way.
		return st.First.Forecasts+st.First.Unknown >= 1
	})
	_, queuesPage := b.get("/queues")
	// One job or several, with a range or without (web/estimates.go).
	if !strings.Contains(html.UnescapeString(queuesPage), "that waited") {
		t.Errorf("the queues page shows no calibration")
	}
}

// pageText is the text of a page after marker, up to the next tag.
func pageText(page, marker string) string {
	i := strings.Index(page, marker)
	if i < 0 {
		return ""
	}
	rest := page[i+len(marker):]
	if j := strings.IndexByte(rest, '<'); j >= 0 {
		rest = rest[:j]
	}
	return strings.TrimSpace(html.UnescapeString(rest))
}

var etaRe = regexp.MustCompile(`class="eta"[^>]*>([^<]*)<`)

// etaCell is the ETA cell of the table row holding marker.
func etaCell(page, marker string) string {
	i := strings.Index(page, marker)
	if i < 0 {
		return ""
	}
	row := page[i:]
	if j := strings.Index(row, "</tr>"); j >= 0 {
		row = row[:j]
	}
	m := etaRe.FindStringSubmatch(row)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// lineOf is the line of a table that starts with id.
func lineOf(out, id string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, id+" ") {
			return l
		}
	}
	return ""
}

func queueForecast(q apitypes.Queues, id int64) *apitypes.Forecast {
	for _, qu := range q.Queues {
		for _, j := range qu.Jobs {
			if j.ID == id {
				return j.Forecast
			}
		}
	}
	return nil
}

func startKeyIndex(js []apitypes.Job, id int64) int {
	for i, j := range js {
		if j.ID == id {
			return i
		}
	}
	return -1
}

func sameForecast(a, b *apitypes.Forecast) bool {
	if a == nil || b == nil {
		return a == b
	}
	eq := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	return a.State == b.State && a.Reason == b.Reason && eq(a.Earliest, b.Earliest) && eq(a.Likely, b.Likely) &&
		eq(a.Latest, b.Latest) && eq(a.MadeAt, b.MadeAt)
}
