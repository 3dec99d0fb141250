package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
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
// restarted. Then it lets every job finish and checks the traces and
// histories as the other fault tests do. It runs by hand:
//
//	GPUPORTAL_SOAK_MINUTES=30 go test -run TestFaultSoak -v -timeout 60m ./integration
func TestFaultSoak(t *testing.T) {
	minutes, _ := strconv.ParseFloat(os.Getenv("GPUPORTAL_SOAK_MINUTES"), 64)
	if minutes <= 0 {
		t.Skip("a soak runs by hand: set GPUPORTAL_SOAK_MINUTES (and GPUPORTAL_SOAK_SEED)")
	}
	seed, _ := strconv.ParseUint(os.Getenv("GPUPORTAL_SOAK_SEED"), 10, 64)
	if seed == 0 {
		seed = 1
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	data, traces := t.TempDir(), t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	base := "http://" + addr
	args := []string{"--addr", addr}
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
				jsonArgs(tracedJob(traces, 8+rng.IntN(40))))
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
		switch f := rng.IntN(4); f {
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
	t.Logf("seed %d, %.0f minutes: %d jobs accepted, %d runs traced, faults %v", seed, minutes, len(ids), len(spans), faults)
}

// jsonArgs is a command as a JSON array.
func jsonArgs(args []string) string {
	b, _ := json.Marshal(args)
	return string(b)
}

func decodeJSON(resp *http.Response, v any) error {
	return json.NewDecoder(resp.Body).Decode(v)
}
