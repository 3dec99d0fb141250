package wire

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkHeartbeatDecode: what the server spends reading one machine's
// heartbeat (8 GPUs, 4 jobs), decoded once: the message, then its samples
// as gpu.Sample. At 128 machines the server reads 128 a second.
func BenchmarkHeartbeatDecode(b *testing.B) {
	var ns NodeSamples
	ns.Node = "gpu-node-017"
	for i := 0; i < 8; i++ {
		ns.Samples = append(ns.Samples, Sample{At: time.Now(), Index: i, MemUsedMiB: 40000, MemMiB: 81920, UtilPct: 93.5, TempC: 61, PowerW: 412.5,
			Jobs: []JobMem{{JobID: 12345, MemMiB: 39000}}})
	}
	for i := 0; i < 4; i++ {
		ns.Usage = append(ns.Usage, JobUsage{})
	}
	m := Message{Type: TypeHeartbeat, Heartbeat: &Heartbeat{Nodes: []NodeSamples{ns}}}
	raw, _ := json.Marshal(m)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		var out Message
		if err := json.Unmarshal(raw, &out); err != nil {
			b.Fatal(err)
		}
		_ = Samples(out.Heartbeat.Nodes[0].Samples)
	}
}
