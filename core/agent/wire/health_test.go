package wire

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
)

func TestGPUErrorsAndMonitorsCrossTheWire(t *testing.T) {
	in := []gpu.Sample{{At: time.Unix(5, 0).UTC(), Index: 2, MemMiB: 40960, ECCErrors: 3, XIDErrors: 1, LastXID: 79}}
	b, err := json.Marshal(Message{Type: TypeHeartbeat, Heartbeat: &Heartbeat{Nodes: []NodeSamples{{Node: "n1", Samples: FromSamples(in)}}}})
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out := Samples(m.Heartbeat.Nodes[0].Samples)
	if len(out) != 1 || out[0].ECCErrors != 3 || out[0].XIDErrors != 1 || out[0].LastXID != 79 {
		t.Errorf("samples = %+v, want the error counters kept", out)
	}
	b, err = json.Marshal(Node{Name: "n1", Monitor: true})
	if err != nil {
		t.Fatal(err)
	}
	var n Node
	if err := json.Unmarshal(b, &n); err != nil || !n.Monitor {
		t.Errorf("node = %+v, %v; want a monitor", n, err)
	}
}
