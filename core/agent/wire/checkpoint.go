package wire

import (
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// Checkpoint copies (job/checkpoint.go): agents report each run's
// checkpoint folder with its usage and its exit (CheckpointState); the
// server reads the folder through a files tunnel (Dial with Files) when it
// has changed, keeps the copy, and sends it with a later start of the part
// (JobSpec.Checkpoint). The machine fetches the copy from CheckpointPath,
// presenting the start's one-time token in CheckpointTokenHeader, when its
// own folder is older.

// CheckpointPath is where agents fetch the server's copies of checkpoints.
const CheckpointPath = "/api/v1/agents/checkpoint"

// CheckpointTokenHeader carries a copy's one-time token (CheckpointCopy.Token).
const CheckpointTokenHeader = "X-Gpuportal-Checkpoint"

// CheckpointState is what a run's checkpoint folder holds (job.CheckpointState).
type CheckpointState struct {
	Part  int       `json:"part,omitempty"`
	At    time.Time `json:"at"`
	Run   int64     `json:"run,omitempty"`
	Bytes int64     `json:"bytes"`
	Files int       `json:"files"`
}

// CheckpointCopy is the server's copy of a part's checkpoint folder (job.CheckpointCopy).
type CheckpointCopy struct {
	Run   int64     `json:"run,omitempty"`
	Node  string    `json:"node"`
	At    time.Time `json:"at"`
	Bytes int64     `json:"bytes,omitempty"`
	Token string    `json:"token"`
}

// fromCheckpointState encodes a folder's state; nil stays nil.
func fromCheckpointState(c *job.CheckpointState) *CheckpointState {
	if c == nil {
		return nil
	}
	return &CheckpointState{Part: c.Part, At: c.At, Run: c.Run, Bytes: c.Bytes, Files: c.Files}
}

// state decodes a folder's state; nil stays nil.
func (w *CheckpointState) state() *job.CheckpointState {
	if w == nil {
		return nil
	}
	return &job.CheckpointState{Part: w.Part, At: w.At, Run: w.Run, Bytes: w.Bytes, Files: w.Files}
}

// fromCheckpointCopy encodes a copy; nil stays nil.
func fromCheckpointCopy(c *job.CheckpointCopy) *CheckpointCopy {
	if c == nil {
		return nil
	}
	return &CheckpointCopy{Run: c.Run, Node: c.Node, At: c.At, Bytes: c.Bytes, Token: c.Token}
}

// copy decodes a copy; nil stays nil.
func (w *CheckpointCopy) copy() *job.CheckpointCopy {
	if w == nil {
		return nil
	}
	return &job.CheckpointCopy{Run: w.Run, Node: w.Node, At: w.At, Bytes: w.Bytes, Token: w.Token}
}
