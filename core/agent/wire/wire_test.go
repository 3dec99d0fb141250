package wire

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantErr string
	}{
		{"hello", `{"type":"hello","hello":{"version":1,"agent":"a","nodes":[]}}`, ""},
		{"ack with an id", `{"type":"ack","id":7,"ack":{}}`, ""},
		{"field missing", `{"type":"exit","id":3}`, "without its exit"},
		{"wrong field", `{"type":"stop","start":{"node":"n"}}`, "without its stop"},
		{"unknown type", `{"type":"reboot"}`, "unknown message type"},
		{"no type", `{}`, "unknown message type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m Message
			if err := json.Unmarshal([]byte(tc.raw), &m); err != nil {
				t.Fatal(err)
			}
			err := m.Check()
			if (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Check() = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestCheckNodeName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"gpu-01", true},
		{"gpu01.example.com", true},
		{"node_7", true},
		{"", false},
		{"../etc", false},
		{"a/b", false},
		{".hidden", false},
		{"-flag", false},
		{strings.Repeat("n", 63), true},
		{strings.Repeat("n", 64), false},
		{"has space", false},
	}
	for _, tc := range tests {
		if err := CheckNodeName(tc.name); (err == nil) != tc.ok {
			t.Errorf("CheckNodeName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestSamplesRoundTripWithoutProcesses(t *testing.T) {
	at := time.Unix(100, 0).UTC()
	in := []gpu.Sample{{
		At: at, Index: 1, MemUsedMiB: 500, MemMiB: 1000, UtilPct: 50, TempC: 60, PowerW: 250.5, ECCErrors: 1,
		Jobs: []gpu.JobMem{{JobID: 4, MemMiB: 400}}, Processes: []gpu.ProcMem{{PID: 9, MemMiB: 100}},
	}}
	raw, err := json.Marshal(FromSamples(in))
	if err != nil {
		t.Fatal(err)
	}
	var back []Sample
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	got := Samples(back)
	want := in[0]
	want.Processes = nil // PIDs mean nothing off the machine
	if len(got) != 1 || got[0].At != want.At || got[0].MemUsedMiB != 500 || got[0].TempC != 60 || got[0].PowerW != 250.5 ||
		got[0].ECCErrors != 1 || len(got[0].Jobs) != 1 || got[0].Jobs[0] != want.Jobs[0] || got[0].Processes != nil {
		t.Errorf("round trip = %+v, want %+v", got, want)
	}
	devs := []gpu.Device{{Index: 0, UUID: "GPU-x", Model: "A100", MemMiB: 40960}}
	if d := Devices(FromDevices(devs)); len(d) != 1 || d[0] != devs[0] {
		t.Errorf("devices round trip = %+v", d)
	}
}
