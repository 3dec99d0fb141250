package agent

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/jobfiles"
	"github.com/gpuportal/gpuportal/core/jobfiles/filehttp"
)

// Checkpoint copies (job/checkpoint.go). The agent reports each run's
// checkpoint folder (folderState) with its usage and its exit; the server
// copies the folder through a files tunnel when it changed. A start that
// brings the server's copy of the part's folder (job.Spec.Checkpoint)
// restores it before the run begins, when the folder here is older: the
// run is the agent's at once (it holds its GPUs and can be stopped), and
// its process starts once the copy is in place, or without it, its output
// saying why, when the copy cannot be had.

// restoreTimeout bounds a copy's restore: past it the run starts from the
// folder as it is here.
const restoreTimeout = 30 * time.Minute

// folderState walks checkpoint folder dir: when its newest regular file
// was written, and how many bytes and files it holds. Links are not
// followed; a folder of more than maxCheckpointEntries entries is judged
// by the first ones walked.
func folderState(dir string) job.CheckpointState {
	var st job.CheckpointState
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable entry says nothing
		}
		if n++; n > maxCheckpointEntries {
			return filepath.SkipAll
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st.Files++
		st.Bytes += info.Size()
		if info.ModTime().After(st.At) {
			st.At = info.ModTime()
		}
		return nil
	})
	return st
}

// checkpointState is what run s's checkpoint folder holds now, and which
// run wrote its newest file, as the record of the job's runs here says.
func (a *Local) checkpointState(s job.Spec) job.CheckpointState {
	st := folderState(a.CheckpointDir(s.JobID))
	st.Part = s.Part()
	if !st.Empty() {
		runs, _ := readRunRecord(a.runRecordPath(s.JobID))
		st.Run = writer(runs, st.At, s.Run+1)
	}
	return st
}

// A folder of many files costs a walk of all of them: such a folder is
// walked at most every bigFolderEvery for the usage the agent reports
// each second (its exit walks it again).
const (
	bigFolder      = 1000 // entries
	bigFolderEvery = 10 * time.Second
)

// checkpointReader reads run s's checkpoint folder for its usage
// (checkpointState), a big folder at most every bigFolderEvery.
func (a *Local) checkpointReader(s job.Spec) func() job.CheckpointState {
	var mu sync.Mutex
	var last job.CheckpointState
	var at time.Time
	return func() job.CheckpointState {
		mu.Lock()
		defer mu.Unlock()
		if last.Files >= bigFolder && time.Since(at) < bigFolderEvery {
			return last
		}
		last, at = a.checkpointState(s), time.Now()
		return last
	}
}

// copyIsNewer reports whether the server's copy c is newer than what
// folder dir holds: the folder is empty, or the run that wrote it (as
// the record of the job's runs here says) is earlier than the copy's, or,
// when that is not known, its newest file is older than the copy's.
func (a *Local) copyIsNewer(s job.Spec, c *job.CheckpointCopy) bool {
	here := folderState(a.CheckpointDir(s.JobID))
	if here.Empty() {
		return true
	}
	runs, _ := readRunRecord(a.runRecordPath(s.JobID))
	if w := writer(runs, here.At, s.Run); w > 0 && c.Run > 0 {
		return c.Run > w
	}
	return c.At.After(here.At.Add(time.Millisecond))
}

// needsRestore reports whether run s must restore the server's copy of
// its checkpoint folder before it starts.
func (a *Local) needsRestore(s job.Spec) bool {
	c := s.Checkpoint
	return c != nil && c.Fetch != nil && s.Checkpointed() && a.copyIsNewer(s, c)
}

// restoreCheckpoint fetches the server's copy of s's checkpoint folder
// and puts it in place of the folder here, as the job's account; its
// output (log) says what was done. It returns the copy restored, or nil
// when none was (the run then starts from the folder as it is).
func (a *Local) restoreCheckpoint(ctx context.Context, s job.Spec, log io.Writer) *job.CheckpointCopy {
	c := s.Checkpoint
	ctx, cancel := context.WithTimeout(ctx, restoreTimeout)
	defer cancel()
	began := time.Now()
	what := fmt.Sprintf("the checkpoint saved on %s at %s", c.Node, c.At.UTC().Format("15:04:05.000"))
	if c.Run > 0 {
		what = fmt.Sprintf("the checkpoint run %d saved on %s at %s", c.Run, c.Node, c.At.UTC().Format("15:04:05.000"))
	}
	body, err := c.Fetch(ctx)
	var sum filehttp.Restored
	if err == nil {
		files := filehttp.NewClient(func(ctx context.Context) (net.Conn, error) { return a.DialFiles(ctx, s.JobID, s.Account) })
		// A server gone quiet mid-copy does not hold the run's start
		// for the whole restoreTimeout.
		sum, err = files.Restore(ctx, jobfiles.JobRoot, "checkpoint", jobfiles.CancelOnStall(ctx, cancel, body, jobfiles.StallTimeout))
		body.Close()
	}
	if err != nil {
		fmt.Fprintf(log, "gpuportal: run %d could not restore %s (kept by the server): %v; it starts from its checkpoint folder on %s as it is\n",
			s.Run, what, err, a.cfg.Name)
		a.cfg.Logger.Warn("checkpoint copy not restored", "job", s.JobID, "run", s.Run, "from_run", c.Run, "from_node", c.Node, "err", err)
		return nil
	}
	fmt.Fprintf(log, "gpuportal: run %d restored %s (kept by the server): %d files, %s, in %s\n",
		s.Run, what, sum.Files, jobfiles.FormatBytes(sum.Bytes), time.Since(began).Round(time.Millisecond))
	return c
}

// fetchCheckpoint opens the server's copy of a checkpoint from the
// server whose agent endpoint a session connected to, with the copy's
// one-time token.
func fetchCheckpoint(ctx context.Context, hc *http.Client, agentEndpoint, token string) (io.ReadCloser, error) {
	u, err := tunnelURL(agentEndpoint)
	if err != nil {
		return nil, err
	}
	u = strings.TrimSuffix(u, wire.TunnelPath) + wire.CheckpointPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch the checkpoint: %w", err)
	}
	req.Header.Set(wire.CheckpointTokenHeader, token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the checkpoint: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("fetch the checkpoint: the server answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return resp.Body, nil
}
