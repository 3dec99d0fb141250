package agent

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// Resuming from a checkpoint. A job's checkpoint folder is the job's, not
// the run's: every run of the job on this machine (or on any machine that
// shares the agents' work folder) finds what the earlier ones saved. As a
// run starts, the agent looks in the folder: when it holds files, the run
// gets GPUPORTAL_RESUME=1, GPUPORTAL_RESUME_RUN (the earlier run that wrote
// the newest file, when the agent's record of the job's runs says) and
// GPUPORTAL_CHECKPOINT_AT (when that file was written, RFC 3339), and its
// output says so. The agent reports what it found with the run's usage
// (job.Resume), so the server can say which run resumed from which
// checkpoint and how much work the fault before it cost.
//
// The record of a job's runs is the agent's, not the job's account's:
// WorkDir/runs/ID, one line per run started here, "RUN UNIXNANO".

// maxCheckpointEntries bounds the walk of a checkpoint folder: a folder of
// more entries is judged by the first ones walked.
const maxCheckpointEntries = 10000

// runStart is one line of a job's run record.
type runStart struct {
	run int64
	at  time.Time
}

func (a *Local) runRecordPath(jobID int64) string {
	return filepath.Join(a.cfg.WorkDir, "runs", strconv.FormatInt(jobID, 10))
}

// readRunRecord reads the runs of a job started on this machine; a
// missing record is empty.
func readRunRecord(path string) ([]runStart, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("record of runs: %w", err)
	}
	var out []runStart
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		run, at, ok := strings.Cut(sc.Text(), " ")
		r, err1 := strconv.ParseInt(run, 10, 64)
		ns, err2 := strconv.ParseInt(at, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			continue // a line cut short by a crash
		}
		out = append(out, runStart{r, time.Unix(0, ns)})
	}
	return out, nil
}

// fileClockLag is how far a file's write time may lag the clock the agent
// reads as a run starts: Linux stamps files from its coarse clock, which
// trails the fine one by up to a scheduler tick (4 ms at 250 Hz, 10 ms at
// 100 Hz), so a run that saves within a tick of its start writes a file
// stamped before it started. A shared folder's server may add its own
// clock's skew; 50 ms covers the tick with room.
const fileClockLag = 50 * time.Millisecond

// writer returns the run of runs that wrote at: the last one started at
// or before it (within fileClockLag), earlier than run; 0 when none.
func writer(runs []runStart, at time.Time, run int64) int64 {
	var w int64
	var wAt time.Time
	at = at.Add(fileClockLag)
	for _, r := range runs {
		if r.run < run && !r.at.After(at) && !r.at.Before(wAt) {
			w, wAt = r.run, r.at
		}
	}
	return w
}

// beginResume looks in the checkpoint folder of s's job, records that run
// s.Run starts now, and returns what the run resumes from and the
// variables that say so (none when the folder is empty). Restored is the
// server's copy just put in the folder (nil: none): the run that wrote
// it and its machine are the copy's, which this machine's record of the
// job's runs does not know.
func (a *Local) beginResume(s job.Spec, now time.Time, restored *job.CheckpointCopy) (job.Resume, []string, error) {
	res, env, err := BeginResume(a.CheckpointDir(s.JobID), a.runRecordPath(s.JobID), s.Run, now)
	if err != nil || restored == nil || !res.Resumed() {
		return res, env, err
	}
	res.FromRun, res.FromNode = restored.Run, restored.Node
	return res, resumeEnv(res), nil
}

// BeginResume looks in checkpoint folder dir as run starts now, adds the
// run to the record of the job's runs at record (a file its runs cannot
// write), and returns what the run resumes from and the variables that
// tell it so: GPUPORTAL_RESUME=1, GPUPORTAL_CHECKPOINT_AT and, when the
// record names the run that wrote the checkpoint, GPUPORTAL_RESUME_RUN;
// none when the folder is empty. The agents, the Slurm executor (whose
// work folder the server and every node share) and the Kubernetes
// executor (whose checkpoint volume the server mounts too) call it.
func BeginResume(dir, record string, run int64, now time.Time) (job.Resume, []string, error) {
	res := job.Resume{Run: run, CheckpointAt: folderState(dir).At}
	runs, err := readRunRecord(record)
	if err != nil {
		return res, nil, err
	}
	if res.Resumed() {
		res.FromRun = writer(runs, res.CheckpointAt, run)
	}
	if err := os.MkdirAll(filepath.Dir(record), 0o700); err != nil {
		return res, nil, fmt.Errorf("record of runs: %w", err)
	}
	f, err := os.OpenFile(record, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return res, nil, fmt.Errorf("record of runs: %w", err)
	}
	_, werr := fmt.Fprintf(f, "%d %d\n", run, now.UnixNano())
	if err := errors.Join(werr, f.Close()); err != nil {
		return res, nil, fmt.Errorf("record of runs: %w", err)
	}
	return res, resumeEnv(res), nil
}

// resumeEnv is the variables that tell a run what it resumes from.
func resumeEnv(r job.Resume) []string {
	if !r.Resumed() {
		return nil
	}
	env := []string{"GPUPORTAL_RESUME=1", "GPUPORTAL_CHECKPOINT_AT=" + r.CheckpointAt.UTC().Format(time.RFC3339Nano)}
	if r.FromRun > 0 {
		env = append(env, "GPUPORTAL_RESUME_RUN="+strconv.FormatInt(r.FromRun, 10))
	}
	return env
}

// resumeLine is what the run's output says of its checkpoint.
func resumeLine(r job.Resume, node string) string {
	switch {
	case !r.Resumed() && r.Run > 1:
		return fmt.Sprintf("gpuportal: run %d starts from scratch: its checkpoint folder on %s is empty\n", r.Run, node)
	case !r.Resumed():
		return ""
	case r.FromRun > 0 && r.FromNode != "":
		return fmt.Sprintf("gpuportal: run %d resumes from the checkpoint run %d wrote at %s on %s (GPUPORTAL_RESUME=1)\n",
			r.Run, r.FromRun, r.CheckpointAt.UTC().Format("15:04:05.000"), r.FromNode)
	case r.FromNode != "":
		return fmt.Sprintf("gpuportal: run %d resumes from the checkpoint written at %s on %s (GPUPORTAL_RESUME=1)\n",
			r.Run, r.CheckpointAt.UTC().Format("15:04:05.000"), r.FromNode)
	case r.FromRun > 0:
		return fmt.Sprintf("gpuportal: run %d resumes from the checkpoint run %d wrote at %s (GPUPORTAL_RESUME=1)\n",
			r.Run, r.FromRun, r.CheckpointAt.UTC().Format("15:04:05.000"))
	default:
		return fmt.Sprintf("gpuportal: run %d resumes from the checkpoint written at %s (GPUPORTAL_RESUME=1)\n",
			r.Run, r.CheckpointAt.UTC().Format("15:04:05.000"))
	}
}
