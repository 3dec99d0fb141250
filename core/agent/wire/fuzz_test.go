package wire

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gpuportal/gpuportal/core/job"
)

// fuzzSeeds are one message of each type, as JSON.
func fuzzSeeds(t testing.TB) [][]byte {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	msgs := []Message{
		{Type: TypeHello, Hello: &Hello{Version: Version, Agent: "gpu-01", Nodes: []Node{{
			Name: "gpu-01", CPUs: 64, MemMiB: 512 << 10, Running: []job.RunRef{{Job: 4, Run: 1}},
			GPUs: []GPU{{Index: 0, UUID: "GPU-1", Model: "A100", MemMiB: 81920}},
		}}}},
		{Type: TypeWelcome, Welcome: &Welcome{Version: Version, HeartbeatTimeoutMS: 30000,
			Logs: []LogOffset{{Node: "gpu-01", JobID: 4, Offset: 1024}}}},
		{Type: TypeHeartbeat, Heartbeat: &Heartbeat{Nodes: []NodeSamples{{Node: "gpu-01", Samples: []Sample{{
			At: at, Index: 0, MemUsedMiB: 100, MemMiB: 81920, UtilPct: 97.5, TempC: 61, PowerW: 301.25, ECCErrors: 2,
			Jobs: []JobMem{{JobID: 4, MemMiB: 90}},
		}}}}}},
		{Type: TypeStart, ID: 1, Start: &Start{Node: "gpu-01", LogOffset: 10, Job: JobSpec{
			JobID: 4, Run: 1, Command: []string{"python", "train.py"}, GPUs: []int{0, 1},
			SimRemainingMS: 5000, SimMemory: &SimMemory{PersistentMiB: 100, EphemeralMiB: 200, IterationMS: 50},
		}}},
		{Type: TypeStop, ID: 2, Stop: &Stop{Node: "gpu-01", JobID: 4, Run: 1}},
		{Type: TypeExit, ID: 3, Exit: &Exit{Node: "gpu-01", JobID: 4, Run: 1, ExitCode: -1, Err: "killed", At: at}},
		{Type: TypeLog, Log: &Log{Node: "gpu-01", JobID: 4, Offset: 7, Data: []byte("epoch 1\n\xff")}},
		{Type: TypeAck, ID: 3, Ack: &Ack{Error: "no such job"}},
	}
	var out [][]byte
	for _, m := range msgs {
		b, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return append(out, []byte(`{"type":"hello"}`), []byte(`{"type":"bogus"}`), []byte(`{}`), []byte(`null`))
}

// FuzzMessage decodes arbitrary frames as a peer does (json, then Check):
// no panic; a rejected frame gets a message; an accepted one survives
// encoding and decoding again unchanged, samples and GPUs included.
func FuzzMessage(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		var m Message
		if err := json.Unmarshal(frame, &m); err != nil {
			return
		}
		if err := m.Check(); err != nil {
			if err.Error() == "" {
				t.Fatalf("%q: rejected without a message", frame)
			}
			return
		}
		first, err := json.Marshal(&m)
		if err != nil {
			t.Fatalf("%q: an accepted message does not encode: %v", frame, err)
		}
		var again Message
		if err := json.Unmarshal(first, &again); err != nil {
			t.Fatalf("%q: re-encoded as %q, which does not decode: %v", frame, first, err)
		}
		if err := again.Check(); err != nil {
			t.Fatalf("%q: re-encoded as %q, which Check refuses: %v", frame, first, err)
		}
		second, err := json.Marshal(&again)
		if err != nil || !bytes.Equal(first, second) {
			t.Fatalf("%q: encodes as %q, then as %q (%v)", frame, first, second, err)
		}
		// (An absent list may come back empty: both mean none.)
		if hb := m.Heartbeat; hb != nil {
			for _, ns := range hb.Nodes {
				if len(ns.Samples) > 0 {
					sameJSON(t, frame, "samples", ns.Samples, FromSamples(Samples(ns.Samples)))
				}
			}
		}
		if h := m.Hello; h != nil {
			for _, n := range h.Nodes {
				if len(n.GPUs) > 0 {
					sameJSON(t, frame, "GPUs", n.GPUs, FromDevices(Devices(n.GPUs)))
				}
			}
		}
	})
}

// sameJSON fails t unless a and b encode alike.
func sameJSON(t *testing.T, frame []byte, what string, a, b any) {
	t.Helper()
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil || !bytes.Equal(ja, jb) {
		t.Fatalf("%q: %s change in a round trip: %s became %s (%v, %v)", frame, what, ja, jb, err1, err2)
	}
}

// FuzzCheckNodeName checks that every name CheckNodeName accepts is safe
// as one element of a path (the server keeps files under it) and short,
// and that every refusal quotes the name.
func FuzzCheckNodeName(f *testing.F) {
	for _, s := range []string{"gpu-01", "node_0.local", "", ".", "..", "../etc", "a/b", `a\b`, "-x", "x\x00", "é", strings.Repeat("a", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if err := CheckNodeName(name); err != nil {
			if !strings.Contains(err.Error(), "node name") {
				t.Fatalf("%q: refused with %q, which does not say what it refused", name, err)
			}
			return
		}
		switch {
		case name == "" || len(name) > 63 || !utf8.ValidString(name):
			t.Fatalf("accepted %q: empty, too long or not UTF-8", name)
		case name == "." || name == ".." || strings.HasPrefix(name, "-") || strings.HasPrefix(name, "."):
			t.Fatalf("accepted %q: a special file name or one that reads as a flag", name)
		case strings.ContainsAny(name, "/\\\x00 \t\n:*?\"'<>|$`"):
			t.Fatalf("accepted %q: it holds a character paths or shells treat specially", name)
		case filepath.Base(name) != name || filepath.Clean(name) != name || !filepath.IsLocal(name):
			t.Fatalf("accepted %q: not one plain element of a path", name)
		}
	})
}
