//go:build soak

package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
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
func TestFaultSoak(t *testing.T) {
	minutes, _ := strconv.ParseFloat(os.Getenv("GPUPORTAL_SOAK_MINUTES"), 64)
	if minutes <= 0 {
		t.Fatal("set GPUPORTAL_SOAK_MINUTES (and GPUPORTAL_SOAK_SEED): ./scripts/soak-faults MINUTES SEED")
	}
	seed, _ := strconv.ParseUint(os.Getenv("GPUPORTAL_SOAK_SEED"), 10, 64)
	if seed == 0 {
		seed = 1
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	data, traces := t.TempDir(), t.TempDir()
	pg := startPrivatePG(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + addr
	args := []string{"--addr", addr, "--db", pg.DSN()}
	srv := faultServer(t, data, args...)

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
			case <-time.After(time.Duration(500+rng.IntN(2500)) * time.Millisecond):
			}
			body := fmt.Sprintf(`{"name":"soak%d","gpus":%d,"command":%s}`, i, 1+rng.IntN(2),
				jsonArgs(checkpointedJob(traces, 8+rng.IntN(40), soakEvery)))
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
	// About time: a soak is faults of random lengths at random moments;
	// its sleeps are the schedule of the chaos, not waits for an event.
	for time.Now().Before(end) {
		time.Sleep(time.Duration(10+rng.IntN(20)) * time.Second)
		a := agents[rng.IntN(len(agents))]
		hold := time.Duration(1000+rng.IntN(7000)) * time.Millisecond
		switch f := rng.IntN(5); f {
		case 0:
			faults["agent frozen"]++
			a.proc.signal(syscall.SIGSTOP)
			time.Sleep(hold)
			a.proc.signal(syscall.SIGCONT)
		case 1:
			faults["agent killed and restarted"]++
			a.proc.kill()
			time.Sleep(hold / 4)
			a.proc = startAgent(t, "http://"+a.fw.addr(), a.name, "--work-dir", a.work)
		case 2:
			faults["partition"]++
			a.fw.freeze()
			time.Sleep(hold)
			a.fw.thaw()
		case 3:
			faults["server killed and restarted"]++
			srv.kill()
			time.Sleep(hold / 2)
			srv = faultServer(t, data, args...)
		case 4:
			faults["database stopped and started"]++
			pg.stop()
			time.Sleep(2 * hold)
			pg.start()
		}
		t.Logf("%s: faults so far %v", time.Now().Format(time.TimeOnly), faults)
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
	spans := checkTraces(t, traces)
	endsOnce(t, alice, ids...)
	lost := soakLost(spans)
	t.Logf("seed %d, %.0f minutes: %d jobs accepted, %d runs traced, faults %v", seed, minutes, len(ids), len(spans), faults)
	t.Logf("runs: %d jobs ran more than once, %d reruns, at most %d runs of one job (job %d)", lost.rerunJobs, lost.reruns, lost.maxRuns, lost.maxJob)
	t.Logf("work lost: %d reruns resumed from a checkpoint, %d from scratch; %d ticks redone (%.1f s), at most %d for one rerun (a checkpoint every %d ticks of %v)",
		lost.resumed, lost.scratch, lost.ticks, float64(lost.ticks)*tick.Seconds(), lost.maxTicks, soakEvery, tick)
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
