package agent

import (
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gpuportal/gpuportal/core/agent/gate"
	"github.com/gpuportal/gpuportal/core/lanes"
)

// GateFlags turn on the Salus gate of an agent (docs/salus.md): jobs that
// opted in to sharing ask it before each iteration. serve's built-in
// agents and gpuportal agent take the same flags.
type GateFlags struct {
	off    bool
	policy string
}

// Register defines --no-gate and --lane-policy on fs.
func (g *GateFlags) Register(fs *flag.FlagSet) {
	fs.BoolVar(&g.off, "no-gate", false, "serve no Salus gate: jobs that opted in to sharing run unshared")
	fs.StringVar(&g.policy, "lane-policy", string(lanes.Fair), "which job of a Salus lane runs the next iteration: fair (least GPU time so far), srtf (least work left; needs declared durations) or pack (arrival order)")
}

// Check validates the flags of command cmd.
func (g *GateFlags) Check(cmd string) error {
	p, err := lanes.ParsePolicy(g.policy)
	if err != nil {
		return fmt.Errorf("%s: --lane-policy: %w", cmd, err)
	}
	g.policy = string(p)
	return nil
}

// Config is the gate of an agent working in workDir: on unless --no-gate,
// or where it cannot work. It needs Linux, which tells the gate which
// process connected (SO_PEERCRED), and a socket path short enough.
func (g GateFlags) Config(workDir string, log *slog.Logger) *lanes.Config {
	if g.off {
		return nil
	}
	if runtime.GOOS != "linux" {
		log.Warn("no Salus gate: it needs Linux; jobs that opted in to sharing run unshared")
		return nil
	}
	abs, err := filepath.Abs(workDir)
	if err == nil && len(filepath.Join(abs, "gate.sock")) > gate.MaxPathBytes {
		log.Warn("no Salus gate: the work folder's path is too long for its socket; choose a shorter one",
			"path", abs, "max_bytes", gate.MaxPathBytes-len("/gate.sock"))
		return nil
	}
	return &lanes.Config{Policy: lanes.Policy(strings.ToLower(g.policy))}
}
