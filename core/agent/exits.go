package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/job"
)

// A remote agent keeps each run's exit in the job's folder until the
// server acknowledges it (which the server does only once its store has
// it), so that an exit survives a restart of the agent as well as a lost
// connection: WorkDir/jobs/ID/exit-RUN.json.

// exitPath is where the exit of run ref is kept.
func (a *Local) exitPath(ref job.RunRef) string {
	return filepath.Join(a.jobDir(ref.Job), "exit-"+strconv.FormatInt(ref.Run, 10)+".json")
}

// keepExit writes ex to disk, replacing the file at once (write, sync,
// rename), so that a crash leaves the old file or the new one.
func (a *Local) keepExit(ex job.Exit) error {
	data, err := json.Marshal(wire.FromExit(ex))
	if err != nil {
		return fmt.Errorf("keep exit of %s: %w", ex.Ref(), err)
	}
	path := a.exitPath(ex.Ref())
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("keep exit of %s: %w", ex.Ref(), err)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("keep exit of %s: %w", ex.Ref(), err)
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("keep exit of %s: %w", ex.Ref(), err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("keep exit of %s: %w", ex.Ref(), err)
	}
	return nil
}

// dropExit forgets the kept exit of ref, once the server has it.
func (a *Local) dropExit(ref job.RunRef) {
	if err := os.Remove(a.exitPath(ref)); err != nil && !errors.Is(err, os.ErrNotExist) {
		a.cfg.Logger.Warn("forget a job exit the server has", "job", ref.Job, "run", ref.Run, "err", err)
	}
}

// keptExits reads the exits an earlier agent process kept and the server
// has not acknowledged.
func (a *Local) keptExits() ([]job.Exit, error) {
	paths, err := filepath.Glob(filepath.Join(a.cfg.WorkDir, "jobs", "*", "exit-*.json"))
	if err != nil {
		return nil, fmt.Errorf("kept exits: %w", err)
	}
	var out []job.Exit
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("kept exit: %w", err)
		}
		var w wire.Exit
		if err := json.Unmarshal(data, &w); err != nil || w.JobID <= 0 || w.Run <= 0 || w.Node != a.cfg.Name {
			a.cfg.Logger.Warn("ignoring a kept job exit that does not read", "file", p, "err", err)
			continue
		}
		if !strings.HasSuffix(p, "exit-"+strconv.FormatInt(w.Run, 10)+".json") {
			continue
		}
		out = append(out, w.Exit())
	}
	return out, nil
}

// credentialPath is where the machine's credential is kept: the server
// gave it when the machine joined (docs/agents.md, "Joining machines").
func (a *Local) credentialPath() string { return filepath.Join(a.cfg.WorkDir, "credential") }

// credential is the machine's credential, empty before it joined.
func (a *Local) credential() string {
	b, err := os.ReadFile(a.credentialPath())
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// saveCredential keeps the machine's credential, readable by the agent's
// user only.
func (a *Local) saveCredential(c string) error {
	tmp := a.credentialPath() + ".tmp"
	if err := os.WriteFile(tmp, []byte(c+"\n"), 0o600); err != nil {
		return fmt.Errorf("keep the machine's credential: %w", err)
	}
	if err := os.Rename(tmp, a.credentialPath()); err != nil {
		return fmt.Errorf("keep the machine's credential: %w", err)
	}
	return nil
}
