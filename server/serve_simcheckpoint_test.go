package server

import (
	"io"
	"testing"
	"time"
)

// TestSimCheckpointFlag: --sim-checkpoint is how long the built-in
// agents' simulated jobs take to leave once stopped; --demo makes it 5 s
// unless the flag says otherwise, and a negative time is refused naming
// the flag.
func TestSimCheckpointFlag(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want time.Duration
	}{
		{"default", nil, 0},
		{"demo", []string{"--dev", "--demo"}, demoSimCheckpoint},
		{"demo, at once", []string{"--dev", "--demo", "--sim-checkpoint", "0"}, 0},
		{"set", []string{"--sim-checkpoint", "8s"}, 8 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := parseServeFlags(c.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if f.simCheckpoint != c.want {
				t.Errorf("sim checkpoint %v; want %v", f.simCheckpoint, c.want)
			}
		})
	}
	checkServeFlags(t, []flagCase{{"negative", []string{"--sim-checkpoint", "-1s"}, "--sim-checkpoint"}})
}
