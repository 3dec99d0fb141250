package job

import (
	"context"
	"io"
	"time"
)

// Checkpoint copies (docs/agents.md, "Resuming on another machine"): the
// server keeps a copy of each part's checkpoint folder, read from the
// machine that runs it whenever the folder has changed and settled, and
// once more as the run ends. A later run of the part on a machine whose
// folder is older (another machine, or one whose folder was lost) gets
// the copy restored before it starts, so that a job moved by a fault or a
// preemption resumes rather than starting from scratch.

// CheckpointState is what a run's checkpoint folder holds on its machine:
// when its newest file was written, by which run (as the machine's record
// of the job's runs says; 0: not known), and how many bytes and files it
// holds. Part is the run's part of the job (its rank; 0 on one machine).
type CheckpointState struct {
	Part  int
	At    time.Time
	Run   int64
	Bytes int64
	Files int
}

// Empty reports whether the folder holds no file.
func (c CheckpointState) Empty() bool { return c.At.IsZero() }

// CheckpointCopy is the server's copy of a part's checkpoint folder, sent
// with a start (Spec.Checkpoint): the run and machine it was read from,
// when its newest file was written, its size, and a one-time token the
// machine fetches it with. Run is the run that wrote the newest file (0:
// not known); Bytes is 0 while the copy is being made.
type CheckpointCopy struct {
	// Part is the part of the job (its rank) the copy is of; a start
	// brings its own part's, and does not say it.
	Part  int `json:"-"`
	Run   int64
	Node  string
	At    time.Time
	Bytes int64
	Token string
	// Fetch opens the copy (a .tar.gz of the folder) from the server that
	// sent the start; the agent's connection sets it. It never travels.
	Fetch func(ctx context.Context) (io.ReadCloser, error) `json:"-"`
}

// CheckpointCopyStats are the server's figures of its checkpoint copies,
// for /metrics: copies made and failed and the bytes made, copies sent
// to machines for a run to resume from, and the copies kept now (one per
// part of a job) with their bytes on disk.
type CheckpointCopyStats struct {
	Copied, Failed, CopiedBytes int64
	Fetched                     int64
	Kept                        int
	KeptBytes                   int64
}

// Checkpointed reports whether a run of s has a checkpoint folder its
// machine reports and the server copies: a batch command or container,
// not a session nor a simulated job.
func (s Spec) Checkpointed() bool {
	return s.Session == nil && (len(s.Command) > 0 || s.Image != "")
}

// Part is the part of its job s starts: its rank, 0 on one machine.
func (s Spec) Part() int {
	if s.Gang != nil {
		return s.Gang.Rank
	}
	return 0
}
