package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestExitMeasuredRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	measured := &Estimate{PersistentMiB: 1000, EphemeralMiB: 2600, Source: "measured"}
	tests := []struct {
		name string
		exit Exit
		key  bool // "measured" appears in the JSON
	}{
		{"with a measured estimate", Exit{Node: "n1", JobID: 7, ExitCode: -1, Err: "terminated", At: at, Measured: measured}, true},
		{"without: the field is left out", Exit{Node: "n1", JobID: 7, At: at}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.exit)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(b), `"measured"`); got != tc.key {
				t.Fatalf("%s: measured key %v, want %v", b, got, tc.key)
			}
			var back Exit
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tc.exit) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", back, tc.exit)
			}
		})
	}
	// An older agent's exit has no such field: nothing measured.
	var old Exit
	if err := json.Unmarshal([]byte(`{"node":"n","job_id":4,"exit_code":1,"at":"2026-11-22T12:00:00Z"}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.Measured != nil {
		t.Fatalf("older exit decoded with a measured estimate %+v", old.Measured)
	}
}
