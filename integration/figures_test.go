package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	apitypes "github.com/gpuportal/gpuportal/api"
)

// figuresRun is how long TestFiguresAgree watches the demo.
const figuresRun = 60 * time.Second

// TestFiguresAgree runs "serve --dev --demo" and, every few seconds while
// jobs run, reads every figure that appears in more than one place: a
// job's executed time and attained service from GET /api/v1/jobs/{id},
// its page, "gpuportal job show", the queues (API, page, topic), its
// team's topic and its own topic; the GPUs teams hold from the API, the
// teams page, a team's page and /metrics. Executed time and attained
// service only grow, so a figure read between two reads of the API lies
// between them (a figure that says when it was read, as_of, is placed by
// that time); while a run goes on they grow with the clock. GPUs in use
// never exceed the cluster's, and a job borrows only while its team is
// over its guarantee.
func TestFiguresAgree(t *testing.T) {
	t.Parallel() // waits on the binary and the clock: see TestMain
	srv := startServer(t, "--demo", "--data", t.TempDir())
	admin := newAPI(t, srv.URL, "admin", "dev")
	b := newBrowser(t, srv.URL)
	b.login("admin", "dev")
	cl := newCLI(t, srv.URL)
	cliEnv := []string{"GPUPORTAL_TOKEN=" + admin.token}

	cluster := 0
	eventually(t, 20*time.Second, "the built-in agent's GPUs", func() bool {
		var nodes []apitypes.Node
		admin.do(http.MethodGet, "/api/v1/nodes", nil, &nodes)
		cluster = 0
		for _, n := range nodes {
			cluster += len(n.GPUs)
		}
		return cluster > 0
	})

	f := &figures{t: t, cluster: float64(cluster), api: map[int64][]jobReading{}}
	stream := f.follow(t, srv.URL, b, "queues", "team:vision", "team:nlp")
	defer stream.Close()

	deadline := time.Now().Add(figuresRun)
	rounds := 0
	for ; time.Now().Before(deadline); rounds++ {
		f.round(admin, b, cl, cliEnv, stream)
		time.Sleep(3 * time.Second) // about time: rounds of readings over figuresRun, the demo changing between them
	}
	f.checkStream(stream)
	t.Logf("%d rounds on %d GPUs: %d jobs followed, %d growths seen, %d borrowed jobs in team topics, %d cross-checks (%s)",
		rounds, cluster, len(f.api), f.grew, f.borrowed, f.checks, f.bySource())
	if rounds < 5 {
		t.Errorf("only %d rounds in %v", rounds, figuresRun)
	}
	if f.grew < 5 {
		t.Errorf("executed time and attained service were seen growing %d times; want 5 at least", f.grew)
	}
	for _, src := range []string{"page", "cli", "queues api", "queues page", "queues topic", "team topic", "job topic", "teams page", "metrics", "cluster page"} {
		if f.sources[src] == 0 {
			t.Errorf("no figure was checked from the %s", src)
		}
	}
}

// figures keeps what TestFiguresAgree read.
type figures struct {
	t       *testing.T
	cluster float64
	// api holds every reading of each followed job from the API, in order.
	api      map[int64][]jobReading
	grew     int
	checks   int
	borrowed int // borrowed jobs the team topics showed
	sources  map[string]int
}

// jobReading is one reading of a job's figures, taken between from and to
// on this machine's clock (the server's: they run on one machine).
type jobReading struct {
	from, to   time.Time
	state      string
	executed   float64
	attained   float64
	gpus       int
	runs       int // preemptions + failures: a change means a new run
	asOf       *time.Time
	borrowed   bool
	heldGPUs   float64
	stillSince time.Time // the run's start, when known
}

func (r jobReading) String() string {
	return fmt.Sprintf("%s executed %.1fs attained %.1f GPU-s (read %s-%s)", r.state, r.executed, r.attained,
		r.from.Format("15:04:05.000"), r.to.Format("15:04:05.000"))
}

// Slack for figures read at about the same time: pages round to the
// second and the GPU-second, and a job read just before its run ends
// may be counted to the moment after.
const (
	slackS = 1.5
)

func (f *figures) note(src string) {
	f.checks++
	if f.sources == nil {
		f.sources = map[string]int{}
	}
	f.sources[src]++
}

func (f *figures) bySource() string {
	var parts []string
	for k, v := range f.sources {
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	return strings.Join(parts, ", ")
}

// readJob reads job id from the API and records it.
func (f *figures) readJob(a *api, id int64) jobReading {
	var j apitypes.Job
	from := time.Now()
	if st := a.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &j); st != http.StatusOK {
		f.t.Fatalf("GET job %d: %d", id, st)
	}
	r := jobReading{from: from, to: time.Now(), state: string(j.State), executed: j.ExecutedS, attained: j.AttainedService,
		gpus: j.GPUs, runs: j.Preemptions + j.Failures, asOf: j.AsOf, borrowed: j.Borrowed, heldGPUs: j.HeldGPUs}
	if j.State == "running" && j.AsOf == nil {
		f.t.Errorf("job %d runs but its figures say not when they were read", id)
	}
	if j.State == "running" && (j.HeldGPUs <= 0 || j.HeldGPUs > float64(j.GPUs)+1e-9) {
		f.t.Errorf("job %d runs on %d GPUs and holds %v", id, j.GPUs, j.HeldGPUs)
	}
	f.api[id] = append(f.api[id], r)
	return r
}

// between checks that the figures of job id a source showed, read after
// the API's reading before and before its reading after, lie between the
// two: they never fall. An executed time of NaN is a source without one.
func (f *figures) between(src string, id int64, before, after jobReading, executed, attained float64) {
	f.t.Helper()
	f.note(src)
	gpus := float64(max(before.gpus, 1))
	if !math.IsNaN(executed) && (executed < before.executed-slackS || executed > after.executed+slackS) {
		f.t.Errorf("job %d: %s says executed %.1fs; the API said %s, then %s", id, src, executed, before, after)
	}
	if attained < before.attained-slackS*gpus || attained > after.attained+slackS*gpus {
		f.t.Errorf("job %d: %s says attained %.1f GPU-s; the API said %s, then %s", id, src, attained, before, after)
	}
}

// at checks figures a source read at time asOf against every reading of
// the API: not below one read before it, not above one read after it.
func (f *figures) at(src string, id int64, asOf time.Time, executed, attained float64) {
	f.t.Helper()
	checked := false
	for _, r := range f.api[id] {
		gpus := float64(max(r.gpus, 1))
		switch {
		case r.to.Before(asOf):
			checked = true
			if executed < r.executed-slackS || attained < r.attained-slackS*gpus {
				f.t.Errorf("job %d: %s said executed %.1fs, attained %.1f GPU-s at %s; the API said %s before",
					id, src, executed, attained, asOf.Format("15:04:05.000"), r)
			}
		case asOf.Before(r.from):
			checked = true
			if executed > r.executed+slackS || attained > r.attained+slackS*gpus {
				f.t.Errorf("job %d: %s said executed %.1fs, attained %.1f GPU-s at %s; the API said %s after",
					id, src, executed, attained, asOf.Format("15:04:05.000"), r)
			}
		}
	}
	if checked {
		f.note(src)
	}
}

// grows checks two API readings of a job: its figures never fall, and
// while one run goes on they grow with the time between the readings.
func (f *figures) grows(id int64, a, b jobReading) {
	f.t.Helper()
	if b.executed < a.executed-0.01 || b.attained < a.attained-0.01 {
		f.t.Errorf("job %d: figures fell from %s to %s", id, a, b)
	}
	if a.state != "running" || b.state != "running" || a.runs != b.runs || a.asOf == nil || b.asOf == nil {
		return
	}
	dt := b.asOf.Sub(*a.asOf).Seconds()
	if dt < 1 {
		return
	}
	if d := b.executed - a.executed; math.Abs(d-dt) > 1 {
		// A preemption and a restart between the readings look like one run.
		if d > dt+1 {
			f.t.Errorf("job %d: executed grew %.1fs in %.1fs: %s, then %s", id, d, dt, a, b)
		}
		return
	}
	if d := b.attained - a.attained; math.Abs(d-dt*float64(a.gpus)) > float64(a.gpus) {
		f.t.Errorf("job %d on %d GPUs: attained grew %.1f GPU-s in %.1fs: %s, then %s", id, a.gpus, d, dt, a, b)
	}
	f.grew++
}

// round reads everything once.
func (f *figures) round(admin *api, b *browser, cl *cli, cliEnv []string, stream *figureStream) {
	t := f.t
	t.Helper()
	var running []apitypes.Job
	admin.do(http.MethodGet, "/api/v1/jobs?scope=all&state=running", nil, &running)
	var follow []int64
	for id, rs := range f.api { // jobs followed before, while they last
		if last := rs[len(rs)-1]; last.state == "running" || last.state == "queued" || last.state == "preempted" {
			follow = append(follow, id)
		}
	}
	// Up to 4 jobs at a time, jobs on several GPUs first.
	slices.SortStableFunc(running, func(a, b apitypes.Job) int { return b.GPUs - a.GPUs })
	for _, j := range running {
		if len(follow) >= 4 {
			break
		}
		if _, ok := f.api[j.ID]; !ok {
			follow = append(follow, j.ID)
		}
	}
	stream.followJobs(follow)

	for _, id := range follow {
		before := f.readJob(admin, id)
		_, page := b.get(fmt.Sprintf("/jobs/%d", id))
		out := cl.ok(cliEnv, "job", "show", strconv.FormatInt(id, 10))
		after := f.readJob(admin, id)
		if rs := f.api[id]; len(rs) > 2 {
			f.grows(id, rs[len(rs)-3], before)
		}
		f.grows(id, before, after)
		if e, a, ok := pageFigures(page); ok {
			f.between("page", id, before, after, e, a)
		} else {
			t.Errorf("job %d's page shows no executed time or attained service", id)
		}
		if e, a, ok := cliFigures(out); ok {
			f.between("cli", id, before, after, e, a)
		} else {
			t.Errorf("gpuportal job show %d printed no executed time or attained service:\n%s", id, out)
		}
	}

	// The queues: API and page between two readings of each job.
	for _, id := range follow {
		f.readJob(admin, id)
	}
	var q apitypes.Queues
	admin.do(http.MethodGet, "/api/v1/queues", nil, &q)
	_, qpage := b.get("/queues/live")
	for _, id := range follow {
		after := f.readJob(admin, id)
		rs := f.api[id]
		before := rs[len(rs)-2]
		if e, a, ok := queueEntry(q, id); ok {
			f.between("queues api", id, before, after, e, a)
		}
		if a, ok := queuePageAttained(qpage, id); ok {
			f.between("queues page", id, before, after, math.NaN(), a)
		}
	}

	f.teams(admin, b)
	f.busy(admin, b)
}

// busy checks the GPUs busy (allocated to running jobs) on the cluster
// page and in /metrics gpuportal_gpus{state="busy"} against the GPUs the
// API places running jobs on, read before and after.
func (f *figures) busy(admin *api, b *browser) {
	t := f.t
	placed := func() int {
		var running []apitypes.Job
		admin.do(http.MethodGet, "/api/v1/jobs?scope=all&state=running", nil, &running)
		on := map[string]bool{}
		for _, j := range running {
			for _, g := range j.Placement {
				on[g] = true
			}
		}
		return len(on)
	}
	before := placed()
	_, page := b.get("/cluster")
	metrics := metricsText(t, admin.base)
	after := placed()
	lo, hi := float64(min(before, after)), float64(max(before, after))
	shown := float64(strings.Count(page, `data-field="gpu-state">busy</span>`))
	f.note("cluster page")
	if shown < lo || shown > hi {
		t.Errorf("cluster page: %v GPUs busy; the API placed running jobs on %d, then %d GPUs", shown, before, after)
	}
	m, ok := metricValue(metrics, `gpuportal_gpus{state="busy"}`, "")
	f.note("metrics")
	if !ok || m < lo || m > hi {
		t.Errorf(`/metrics: gpuportal_gpus{state="busy"} is %v (found %v); the API placed running jobs on %d, then %d GPUs`, m, ok, before, after)
	}
	// The GPU wall's "GPUs busy" line counts the readings' held jobs (the
	// gpus topic and GET /api/v1/gpus send the same points). A reading is
	// up to a second old, so a job starting or ending in between may move
	// the count: it must fall between two placements read around it in
	// one of a few tries.
	var got []string
	for try := 0; try < 5; try++ {
		before := placed()
		var series []apitypes.GPUSeries
		admin.do(http.MethodGet, fmt.Sprintf("/api/v1/gpus?since=%d", time.Now().Unix()-3), nil, &series)
		after := placed()
		busy := 0
		for _, g := range series {
			if n := len(g.Points); n > 0 && len(g.Points[n-1].Held) > 0 {
				busy++
			}
		}
		if busy >= min(before, after) && busy <= max(before, after) {
			got = nil
			break
		}
		got = append(got, fmt.Sprintf("%d busy in the readings, placed on %d then %d", busy, before, after))
		time.Sleep(300 * time.Millisecond)
	}
	f.note("gpus")
	if got != nil {
		t.Errorf("GET /api/v1/gpus: the latest readings' held jobs disagree with the running jobs' placements: %s", strings.Join(got, "; "))
	}
}

// gpus writes a number of GPUs as the pages do: 3, 2.5, 0.33.
func gpus(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }

// teams checks the GPUs in use and borrowed of the teams from the API,
// the teams page, each team's page and /metrics.
func (f *figures) teams(admin *api, b *browser) {
	t := f.t
	var before, after []apitypes.TeamShare
	admin.do(http.MethodGet, "/api/v1/teams", nil, &before)
	_, page := b.get("/teams")
	metrics := metricsText(t, admin.base)
	admin.do(http.MethodGet, "/api/v1/teams", nil, &after)
	for _, ts := range [][]apitypes.TeamShare{before, after} {
		total := 0.0
		for _, tm := range ts {
			total += tm.InUseGPUs
			want := max(0, tm.InUseGPUs-float64(tm.GuaranteeGPUs))
			if math.Abs(tm.BorrowedGPUs-want) > 1e-6 {
				t.Errorf("team %s: %v in use of %d guaranteed, %v borrowed", tm.Name, tm.InUseGPUs, tm.GuaranteeGPUs, tm.BorrowedGPUs)
			}
		}
		if total > f.cluster+1e-6 {
			t.Errorf("teams hold %v GPUs of a cluster of %v: %+v", total, f.cluster, ts)
		}
	}
	for i, tm := range before {
		if i >= len(after) || after[i].Name != tm.Name {
			continue
		}
		for field, pair := range map[string][2]float64{
			"in_use_gpus":   {tm.InUseGPUs, after[i].InUseGPUs},
			"borrowed_gpus": {tm.BorrowedGPUs, after[i].BorrowedGPUs},
		} {
			shown, ok := teamCell(page, tm.Name, field)
			f.note("teams page")
			if !ok || (shown != gpus(pair[0]) && shown != gpus(pair[1])) {
				t.Errorf("teams page: %s of %s is %q; the API said %v, then %v", field, tm.Name, shown, pair[0], pair[1])
			}
			name := map[string]string{"in_use_gpus": "gpuportal_team_gpus_in_use", "borrowed_gpus": "gpuportal_team_gpus_borrowed"}[field]
			m, ok := metricValue(metrics, name, tm.Name)
			f.note("metrics")
			if !ok || (math.Abs(m-pair[0]) > 1e-6 && math.Abs(m-pair[1]) > 1e-6) {
				t.Errorf("/metrics: %s of %s is %v (found %v); the API said %v, then %v", name, tm.Name, m, ok, pair[0], pair[1])
			}
		}
		// A team's page: the live card, the table and the chart's last
		// point are of one moment.
		_, tp := b.get("/teams/" + url.PathEscape(tm.Name))
		inUse, ok1 := cardField(tp, "in_use_gpus")
		borrowed, ok2 := cardField(tp, "borrowed_gpus")
		cell, ok3 := teamCell(tp, tm.Name, "in_use_gpus")
		last, ok4 := lastSample(tp)
		f.note("team page")
		if !ok1 || !ok2 || !ok3 || !ok4 || cell != inUse || gpus(last[1]) != inUse || gpus(last[2]) != borrowed {
			t.Errorf("team %s's page: card %q in use, %q borrowed; table %q; chart ends at %v", tm.Name, inUse, borrowed, cell, last)
		}
	}
	if v, ok := metricValue(metrics, "gpuportal_gpus_in_use", ""); !ok || v > f.cluster {
		t.Errorf("/metrics: %v GPUs in use (found %v) of a cluster of %v", v, ok, f.cluster)
	}
}

// checkStream checks what the topics sent against the API's readings,
// placed by the time each message says its figures were read, and that
// a team topic shows a borrowed job only while its team is over its
// guarantee.
func (f *figures) checkStream(s *figureStream) {
	t := f.t
	s.mu.Lock()
	msgs := append([]streamMsg(nil), s.msgs...)
	s.mu.Unlock()
	for _, m := range msgs {
		switch {
		case m.Type == "error":
			t.Errorf("topic %s: %s", m.Topic, m.Error)
		case m.Topic == "queues":
			var q apitypes.Queues
			if err := json.Unmarshal(m.Data, &q); err != nil {
				t.Fatalf("queues topic: %v", err)
			}
			for id := range f.api {
				if e, a, ok := queueEntry(q, id); ok {
					f.at("queues topic", id, q.AsOf, e, a)
				}
			}
		case strings.HasPrefix(m.Topic, "team:"):
			var tt apitypes.TeamTopic
			if err := json.Unmarshal(m.Data, &tt); err != nil {
				t.Fatalf("%s topic: %v", m.Topic, err)
			}
			tm := tt.Team
			if want := max(0, tm.InUseGPUs-float64(tm.GuaranteeGPUs)); math.Abs(tm.BorrowedGPUs-want) > 1e-6 || tm.InUseGPUs > f.cluster+1e-6 {
				t.Errorf("%s: %v in use of %d guaranteed, %v borrowed", m.Topic, tm.InUseGPUs, tm.GuaranteeGPUs, tm.BorrowedGPUs)
			}
			held := 0
			for _, j := range tt.Queue {
				if j.Borrowed {
					f.borrowed++
				}
				if j.Borrowed && tm.BorrowedGPUs <= 0 {
					t.Errorf("%s: job %d borrowed while the team holds %v of its %d guaranteed GPUs", m.Topic, j.ID, tm.InUseGPUs, tm.GuaranteeGPUs)
				}
				if j.State == "running" {
					held++
				}
				if tt.AsOf != nil && f.api[j.ID] != nil {
					f.at("team topic", j.ID, *tt.AsOf, j.ExecutedS, j.AttainedService)
				}
			}
			if held == 0 && tm.InUseGPUs != 0 {
				t.Errorf("%s: no job runs, %v GPUs in use", m.Topic, tm.InUseGPUs)
			}
		case strings.HasPrefix(m.Topic, "job:"):
			var u apitypes.JobUpdate
			if err := json.Unmarshal(m.Data, &u); err != nil {
				t.Fatalf("%s topic: %v", m.Topic, err)
			}
			if u.Job.AsOf != nil {
				f.at("job topic", u.Job.ID, *u.Job.AsOf, u.Job.ExecutedS, u.Job.AttainedService)
			}
		}
	}
}

// pageFigures reads a job page's executed time and attained service.
func pageFigures(page string) (executed, attained float64, ok bool) {
	e := regexp.MustCompile(`id="job-executed">([^<]+)<`).FindStringSubmatch(page)
	a := regexp.MustCompile(`id="job-attained">(\d+) GPU-seconds<`).FindStringSubmatch(page)
	if e == nil || a == nil {
		return 0, 0, false
	}
	d, err := time.ParseDuration(e[1])
	if err != nil {
		return 0, 0, false
	}
	av, _ := strconv.ParseFloat(a[1], 64)
	return d.Seconds(), av, true
}

// cliFigures reads the same from "gpuportal job show".
func cliFigures(out string) (executed, attained float64, ok bool) {
	var haveE, haveA bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, found := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !found {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "executed":
			d, err := time.ParseDuration(v)
			executed, haveE = d.Seconds(), err == nil
		case "attained service":
			n, err := strconv.ParseFloat(strings.TrimSuffix(v, " GPU-seconds"), 64)
			attained, haveA = n, err == nil
		}
	}
	return executed, attained, haveE && haveA
}

func queueEntry(q apitypes.Queues, id int64) (executed, attained float64, ok bool) {
	for _, qu := range q.Queues {
		for _, j := range qu.Jobs {
			if j.ID == id {
				return j.ExecutedS, j.AttainedService, true
			}
		}
	}
	return 0, 0, false
}

// queuePageAttained reads a job's attained service from the queues page.
func queuePageAttained(page string, id int64) (float64, bool) {
	re := regexp.MustCompile(fmt.Sprintf(`(?s)<tr data-job="%d">.*?data-field="attained_service_gpu_s">(\d+)<`, id))
	m := re.FindStringSubmatch(page)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// teamCell reads a field of a team's row in a shares table.
func teamCell(page, team, field string) (string, bool) {
	re := regexp.MustCompile(fmt.Sprintf(`(?s)<tr data-team="%s">.*?data-field="%s">([^<]*)<`, regexp.QuoteMeta(team), field))
	m := re.FindStringSubmatch(page)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// cardField reads a field of a team page's live card.
func cardField(page, field string) (string, bool) {
	m := regexp.MustCompile(`<strong data-field="` + field + `">([^<]*)<`).FindStringSubmatch(page)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// lastSample is the last point of a team page's usage chart.
func lastSample(page string) ([4]float64, bool) {
	m := regexp.MustCompile(`id="team-usage"[^>]*data-samples="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		return [4]float64{}, false
	}
	var s [][4]float64
	if json.Unmarshal([]byte(html.UnescapeString(m[1])), &s) != nil || len(s) == 0 {
		return [4]float64{}, false
	}
	return s[len(s)-1], true
}

// metricValue reads a gauge, with a team label when team is not empty.
func metricValue(text, name, team string) (float64, bool) {
	prefix := name + " "
	if team != "" {
		prefix = fmt.Sprintf(`%s{team=%q} `, name, team)
	}
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// figureStream follows topics over the websocket and keeps what they
// send, for checkStream.
type figureStream struct {
	conn *websocket.Conn
	mu   sync.Mutex
	msgs []streamMsg
	jobs map[int64]bool
}

type streamMsg struct {
	at time.Time
	wsMsg
}

func (f *figures) follow(t *testing.T, base string, b *browser, topics ...string) *figureStream {
	u, _ := url.Parse(base)
	hdr := http.Header{}
	for _, ck := range b.c.Jar.Cookies(u) {
		hdr.Add("Cookie", ck.Name+"="+ck.Value)
	}
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/ws?topics="+strings.Join(topics, ","), hdr)
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	s := &figureStream{conn: conn, jobs: map[int64]bool{}}
	go func() {
		for {
			var m wsMsg
			if err := conn.ReadJSON(&m); err != nil {
				return
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, streamMsg{at: time.Now(), wsMsg: m})
			s.mu.Unlock()
		}
	}()
	return s
}

// followJobs subscribes to the job:<id> topics of jobs not followed yet.
func (s *figureStream) followJobs(ids []int64) {
	var topics []string
	s.mu.Lock()
	for _, id := range ids {
		if !s.jobs[id] {
			s.jobs[id] = true
			topics = append(topics, fmt.Sprintf("job:%d", id))
		}
	}
	s.mu.Unlock()
	if len(topics) > 0 {
		_ = s.conn.WriteJSON(map[string]any{"subscribe": topics})
	}
}

func (s *figureStream) Close() error { return s.conn.Close() }
