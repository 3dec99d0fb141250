package agent

import (
	"flag"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/lanes"
)

func TestGateFlags(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	parse := func(args ...string) (GateFlags, error) {
		var g GateFlags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		g.Register(fs)
		if err := fs.Parse(args); err != nil {
			return g, err
		}
		return g, g.Check("serve")
	}
	g, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	cfg := g.Config(t.TempDir(), quiet)
	if runtime.GOOS == "linux" && (cfg == nil || cfg.Policy != lanes.Fair) {
		t.Fatalf("default: gate %+v, want on with fair", cfg)
	}
	if g, _ := parse("--lane-policy", "SRTF"); g.Config(t.TempDir(), quiet).Policy != lanes.SRTF && runtime.GOOS == "linux" {
		t.Fatal("--lane-policy srtf not taken")
	}
	if g, _ := parse("--no-gate"); g.Config(t.TempDir(), quiet) != nil {
		t.Fatal("--no-gate: a gate")
	}
	if g, _ := parse(); g.Config("/tmp/"+strings.Repeat("d", 120), quiet) != nil {
		t.Fatal("a work folder too long for the socket: a gate")
	}
	if _, err := parse("--lane-policy", "lifo"); err == nil || !strings.Contains(err.Error(), "--lane-policy") {
		t.Fatalf("bad policy: %v", err)
	}
}
