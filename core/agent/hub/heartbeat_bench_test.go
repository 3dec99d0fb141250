package hub

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gpuportal/gpuportal/core/agent/wire"
)

// BenchmarkHubHeartbeat is what the server spends on agents' heartbeats
// from the socket on: one agent connection running 16 machines of 8 GPUs
// sends b.N heartbeats (each a reading of every GPU, one job on each,
// and 4 jobs' usage per machine, as agent.Client sends them), and the op
// ends when the hub has taken them all (read, decoded, checked, each
// machine's samples converted and kept). The agent's side only writes
// bytes made once. Per op: one heartbeat of 128 GPUs; cpu_us/op is the
// process's CPU (user and system, both ends of the socket), steadier than
// the time on a shared machine.
func BenchmarkHubHeartbeat(b *testing.B) {
	const machines, gpus = 16, 8
	h, srv, _ := startHub(b, false)
	hello := wire.Hello{Version: wire.Version, Agent: "bench"}
	var hb wire.Heartbeat
	now := time.Now()
	for m := range machines {
		name := fmt.Sprintf("gpu-node-%03d", m)
		n := wire.Node{Name: name, CPUs: 64, MemMiB: 1 << 20}
		ns := wire.NodeSamples{Node: name}
		for g := range gpus {
			n.GPUs = append(n.GPUs, wire.GPU{Index: g, UUID: fmt.Sprintf("GPU-%s-%d", name, g), Model: "H100", MemMiB: 81920})
			ns.Samples = append(ns.Samples, wire.Sample{At: now, Index: g, MemUsedMiB: 40000, MemMiB: 81920, UtilPct: 93.5, TempC: 61,
				PowerW: 412.5, Jobs: []wire.JobMem{{JobID: int64(1000 + m*gpus + g), MemMiB: 39000}}})
		}
		for j := range 4 {
			ns.Usage = append(ns.Usage, wire.JobUsage{JobID: int64(1000 + m*gpus + j), At: now, CPUMilli: 8000, MemMiB: 65536,
				UsedCPUMilli: 6500, UsedMemMiB: 30000, Enforced: true})
		}
		hello.Nodes = append(hello.Nodes, n)
		hb.Nodes = append(hb.Nodes, ns)
	}
	ws, welcome, err := rawAgent(b, srv, hello)
	if err != nil || welcome.Type != wire.TypeWelcome {
		b.Fatalf("hello: %v, %+v", err, welcome)
	}
	_ = ws.SetReadDeadline(time.Time{})
	go func() { // the server's pings and messages: read and dropped
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	raw, err := json.Marshal(wire.Message{Type: wire.TypeHeartbeat, Heartbeat: &hb})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	start, cpu0 := h.Heartbeats(), cpuTime(b)
	b.ResetTimer()
	for range b.N {
		if err := ws.WriteMessage(websocket.TextMessage, raw); err != nil {
			b.Fatal(err)
		}
	}
	for h.Heartbeats()-start < int64(b.N) {
		time.Sleep(50 * time.Microsecond)
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu_us/op")
}

// cpuTime is the CPU time the process has used so far (user and system).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
