//go:build soak

package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestFaultSoak runs jobs for GPUPORTAL_SOAK_MINUTES minutes under random
// faults (seeded by GPUPORTAL_SOAK_SEED, default 1): agents frozen and
// thawed, agents killed and restarted, partitions, the server killed and
// restarted, PostgreSQL stopped and started. The jobs checkpoint every 4
// ticks and resume (checkpointedJob). Then it lets every job finish,
// checks the traces and histories as the other fault tests do, and
// reports from the traces the runs per job and the ticks each fault cost
// (what a run redid of the run before it). It runs by hand, behind the
// build tag soak, so that the README's test command does not compile it
// (scripts/soak-faults):
//
//	GPUPORTAL_SOAK_MINUTES=30 go test -tags soak -run TestFaultSoak -v -timeout 60m ./integration
//
// GPUPORTAL_SOAK_TIMEOUT sets the heartbeat timeout T (default 2s, the
// fault suite's). On a loaded machine a process may not run for a second
// or more, which a T of 2 s takes for a lost machine: a fault the soak did
// not make. A larger T keeps those delays out of the figures without
// weakening the soak: every fault that is timed against the lease (a
// freeze, a partition, an agent or server down) lasts as long in units of
// T as at 2 s, so as many outlast the lease and are fenced; a database
// stop, timed against --db-outage-hold, is not stretched. The soak
// reports the machine's load average with its figures.
func TestFaultSoak(t *testing.T) {
	minutes, _ := strconv.ParseFloat(os.Getenv("GPUPORTAL_SOAK_MINUTES"), 64)
	if minutes <= 0 {
		t.Fatal("set GPUPORTAL_SOAK_MINUTES (and GPUPORTAL_SOAK_SEED): ./scripts/soak-faults MINUTES SEED")
	}
	seed, _ := strconv.ParseUint(os.Getenv("GPUPORTAL_SOAK_SEED"), 10, 64)
	if seed == 0 {
		seed = 1
	}
	timeout, stretch, err := soakTimeout(os.Getenv("GPUPORTAL_SOAK_TIMEOUT"))
	if err != nil {
		t.Fatal(err)
	}
	// The faults and the submissions draw from a source each: a
	// rand.Rand is not safe for two goroutines, and with one source the
	// faults a seed makes depended on how many jobs were submitted
	// before each.
	rng, jobRng := rand.New(rand.NewPCG(seed, seed)), rand.New(rand.NewPCG(seed, seed+1))
	data, traces := t.TempDir(), t.TempDir()
	pg := startPrivatePG(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + addr
	args := []string{"--data", data, "--heartbeat-timeout", timeout.String(), "--grace", faultGrace,
		"--max-retries", "0", "--policy", "fifo", "--addr", addr, "--db", pg.DSN()}
	srv := startAgentServer(t, args...)
	var load loadSamples
	load.sample(t)

	type soakAgent struct {
		name, work string
		fw         *forwarder
		proc       *server
	}
	var agents []*soakAgent
	for i := range 3 {
		a := &soakAgent{name: fmt.Sprint("soak", i), work: t.TempDir(), fw: newForwarder(t, addr)}
		a.proc = startAgent(t, "http://"+a.fw.addr(), a.name, "--work-dir", a.work)
		agents = append(agents, a)
	}
	waitGPUs(t, base, 6)

	var mu sync.Mutex
	var accepted []int64
	token := newAPI(t, base, "alice", "dev").token
	stopSubmit := make(chan struct{})
	submitted := make(chan struct{})
	go func() {
		defer close(submitted)
		for i := 0; ; i++ {
			select {
			case <-stopSubmit:
				return
			case <-time.After(time.Duration(500+jobRng.IntN(2500)) * time.Millisecond):
			}
			body := fmt.Sprintf(`{"name":"soak%d","gpus":%d,"command":%s}`, i, 1+jobRng.IntN(2),
				jsonArgs(checkpointedJob(traces, 8+jobRng.IntN(40), soakEvery)))
			req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/jobs", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				continue // the server is down: not accepted
			}
			var j jobView
			if resp.StatusCode == http.StatusCreated && decodeJSON(resp, &j) == nil {
				mu.Lock()
				accepted = append(accepted, j.ID)
				mu.Unlock()
			}
			resp.Body.Close()
		}
	}()

	end := time.Now().Add(time.Duration(minutes * float64(time.Minute)))
	faults := map[string]int{}
	soakAPI := &api{t: t, base: base, token: token}
	cancelled := map[int64]time.Time{} // jobs cancelled while running, when
	// About time: a soak is faults of random lengths at random moments;
	// its sleeps are the schedule of the chaos, not waits for an event.
	for time.Now().Before(end) {
		time.Sleep(time.Duration(10+rng.IntN(20)) * time.Second)
		a := agents[rng.IntN(len(agents))]
		hold := time.Duration(1000+rng.IntN(7000)) * time.Millisecond // 0.5 to 4 T at T = 2 s
		leased := time.Duration(float64(hold) * stretch)              // as long in units of T
		var what, detail string
		switch f := rng.IntN(6); f {
		case 0:
			what = "agent frozen"
			a.proc.signal(syscall.SIGSTOP)
			time.Sleep(leased)
			a.proc.signal(syscall.SIGCONT)
		case 1:
			what = "agent killed and restarted"
			a.proc.kill()
			time.Sleep(leased / 4)
			a.proc = startAgent(t, "http://"+a.fw.addr(), a.name, "--work-dir", a.work)
		case 2:
			what = "partition"
			a.fw.freeze()
			time.Sleep(leased)
			a.fw.thaw()
		case 3:
			what = "server killed and restarted"
			srv.kill()
			time.Sleep(leased / 2)
			srv = startAgentServer(t, args...)
		case 4:
			what = "database stopped and started"
			pg.stop()
			time.Sleep(2 * hold)
			pg.start()
		case 5:
			// The server restarts while a stop it asked for is under way:
			// the job must end cancelled, and never run again.
			what = "a running job cancelled, then the server killed and restarted"
			if id, ok := cancelOneRunning(soakAPI); ok {
				cancelled[id] = time.Now()
				detail = fmt.Sprintf(": job %d", id)
			} else {
				detail = ": no job was running, the server killed only"
			}
			srv.kill()
			time.Sleep(leased / 2)
			srv = startAgentServer(t, args...)
		}
		faults[what]++
		load.sample(t)
		t.Logf("%s: %s%s (%s, %v); load %.2f; faults so far %v", time.Now().Format(time.TimeOnly), what, detail, a.name,
			leased.Round(time.Millisecond), load.last(), faults)
	}
	close(stopSubmit)
	<-submitted
	alice := newAPI(t, base, "alice", "dev")
	mu.Lock()
	ids := append([]int64(nil), accepted...)
	mu.Unlock()
	for _, id := range ids {
		alice.waitState(id, 10*time.Minute, "succeeded", "failed", "cancelled")
	}
	load.sample(t)
	spans := checkTraces(t, traces)
	for id, at := range cancelled {
		if j := alice.job(id); j.State != "cancelled" {
			t.Errorf("job %d, cancelled while running at %s: %s (%s)", id, at.Format(time.TimeOnly), j.State, j.Reason)
		}
		for _, s := range spans {
			if s.job == id && s.first.After(at.Add(time.Second)) {
				t.Errorf("job %d ran again after its cancel at %s: %v", id, at.Format(time.TimeOnly), s)
			}
		}
	}
	var rest []int64 // the others end once, succeeded
	for _, id := range ids {
		if _, ok := cancelled[id]; !ok {
			rest = append(rest, id)
		}
	}
	endsOnce(t, alice, rest...)
	failed := soakFailures(t, alice, ids, spans)
	lost := soakLost(spans)
	t.Logf("seed %d, %.0f minutes, T = %v: %d jobs accepted, %d runs traced, %d faults %v, %d jobs not succeeded, of them %d cancelled while running (each checked: cancelled, no run after)",
		seed, minutes, timeout, len(ids), len(spans), sumFaults(faults), faults, failed, len(cancelled))
	t.Logf("load average (1 min) at the faults and the end: %s, on %d CPUs", load, runtime.NumCPU())
	t.Logf("runs: %d jobs ran more than once, %d reruns, at most %d runs of one job (job %d)", lost.rerunJobs, lost.reruns, lost.maxRuns, lost.maxJob)
	t.Logf("work lost: %d reruns resumed from a checkpoint, %d from scratch; %d ticks redone (%.1f s), at most %d for one rerun (a checkpoint every %d ticks of %v)",
		lost.resumed, lost.scratch, lost.ticks, float64(lost.ticks)*tick.Seconds(), lost.maxTicks, soakEvery, tick)
}

// cancelOneRunning cancels a running job, as its owner would; false
// when none runs or the cancel was not accepted.
func cancelOneRunning(a *api) (int64, bool) {
	var running []jobView
	if st := a.do(http.MethodGet, "/api/v1/jobs?state=running", nil, &running); st != http.StatusOK || len(running) == 0 {
		return 0, false
	}
	id := running[0].ID
	return id, a.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", id), nil, nil) < 300
}

// soakEvery is how many ticks apart the soak's jobs checkpoint.
const soakEvery = 4

// soakFigures are what the traces say the soak's faults cost.
type soakFigures struct {
	rerunJobs, reruns, maxRuns int
	maxJob                     int64
	resumed, scratch           int
	ticks, maxTicks            int
}

// soakLost reads the runs per job and the ticks each rerun redid from
// spans: of a run on several machines, its first tick is the lowest of
// its parts' and its last the highest.
func soakLost(spans []*runSpan) soakFigures {
	type runTicks struct{ first, last int }
	byJob := map[int64]map[int64]*runTicks{}
	for _, s := range spans {
		if byJob[s.job] == nil {
			byJob[s.job] = map[int64]*runTicks{}
		}
		r := byJob[s.job][s.run]
		if r == nil {
			byJob[s.job][s.run] = &runTicks{s.firstTick, s.lastTick}
			continue
		}
		r.first, r.last = min(r.first, s.firstTick), max(r.last, s.lastTick)
	}
	var f soakFigures
	for id, runs := range byJob {
		if len(runs) > f.maxRuns {
			f.maxRuns, f.maxJob = len(runs), id
		}
		if len(runs) > 1 {
			f.rerunJobs++
			f.reruns += len(runs) - 1
		}
		var prev *runTicks
		for _, n := range slices.Sorted(maps.Keys(runs)) {
			r := runs[n]
			if prev != nil {
				redone := max(prev.last-r.first+1, 0)
				f.ticks += redone
				f.maxTicks = max(f.maxTicks, redone)
				if r.first > 0 {
					f.resumed++
				} else {
					f.scratch++
				}
			}
			prev = r
		}
	}
	return f
}

// jsonArgs is a command as a JSON array.
func jsonArgs(args []string) string {
	b, _ := json.Marshal(args)
	return string(b)
}

func decodeJSON(resp *http.Response, v any) error {
	return json.NewDecoder(resp.Body).Decode(v)
}

// soakTimeout is the soak's heartbeat timeout T from v ("" : the fault
// suite's) and how much longer than the suite's T it is.
func soakTimeout(v string) (time.Duration, float64, error) {
	base, err := time.ParseDuration(faultTimeout)
	if err != nil {
		return 0, 0, err
	}
	if v == "" {
		return base, 1, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < base {
		return 0, 0, fmt.Errorf("GPUPORTAL_SOAK_TIMEOUT %q: want a duration of at least %v", v, base)
	}
	return d, float64(d) / float64(base), nil
}

// sumFaults is the number of faults made.
func sumFaults(faults map[string]int) int {
	n := 0
	for _, c := range faults {
		n += c
	}
	return n
}

// soakFailures logs each job of ids that did not succeed with its
// evidence: its runs as its trace files have them, and its history. It
// returns how many there were.
func soakFailures(t *testing.T, a *api, ids []int64, spans []*runSpan) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		j := a.job(id)
		if j.State == "succeeded" {
			continue
		}
		n++
		t.Logf("job %d %s (%s)", id, j.State, j.Reason)
		for _, s := range spans {
			if s.job == id {
				t.Logf("  trace: %v, ticks %d to %d", s, s.firstTick, s.lastTick)
			}
		}
		for _, h := range jobHistory(t, a, id) {
			t.Logf("  history: %s: %s", h.State, h.Detail)
		}
	}
	return n
}

// loadSamples are the machine's 1-minute load averages, read at moments
// of the soak.
type loadSamples []float64

// sample reads /proc/loadavg.
func (l *loadSamples) sample(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Logf("load average: %v", err)
		return
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		t.Logf("load average %q: %v", f[0], err)
		return
	}
	*l = append(*l, v)
}

func (l loadSamples) last() float64 {
	if len(l) == 0 {
		return 0
	}
	return l[len(l)-1]
}

func (l loadSamples) String() string {
	if len(l) == 0 {
		return "not read"
	}
	sum := 0.0
	for _, v := range l {
		sum += v
	}
	return fmt.Sprintf("min %.2f, mean %.2f, max %.2f over %d readings", slices.Min(l), sum/float64(len(l)), slices.Max(l), len(l))
}
