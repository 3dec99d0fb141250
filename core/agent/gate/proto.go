package gate

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Version is the protocol's version; a request of any other is refused.
const Version = 1

// MaxLineBytes bounds one message; a longer line ends the connection.
const MaxLineBytes = 4096

// maxTokenBytes bounds a hello's token (Add makes them 64 bytes).
const maxTokenBytes = 256

// maxMiB bounds the memory figures a job may send: 1 PiB.
const maxMiB = 1 << 30

// Op names a request.
type Op string

// The requests.
const (
	OpHello   Op = "hello"   // first: names and authenticates the job
	OpAcquire Op = "acquire" // before an iteration; answered when it may start
	OpRelease Op = "release" // after an iteration
)

// Request is one message from a job.
type Request struct {
	V  int `json:"v"`
	Op Op  `json:"op"`
	// Job and Token are the hello's.
	Job   int64  `json:"job,omitempty"`
	Token string `json:"token,omitempty"`
	// ExpectedEMiB is the ephemeral memory an acquire's iteration needs,
	// 0 when the job does not say.
	ExpectedEMiB int64 `json:"expected_e_mib,omitempty"`
	// PeakEMiB is the ephemeral peak a release's iteration measured, 0
	// when not measured.
	PeakEMiB int64 `json:"peak_e_mib,omitempty"`
}

// Reply answers one Request.
type Reply struct {
	V  int  `json:"v"`
	Op Op   `json:"op,omitempty"`
	OK bool `json:"ok"`
	// Error says why OK is false. Stop is set when the job must stop
	// because it outgrew its lane.
	Error string `json:"error,omitempty"`
	Stop  bool   `json:"stop,omitempty"`

	// Job, GPUs and Policy answer a hello.
	Job    int64  `json:"job,omitempty"`
	GPUs   []int  `json:"gpus,omitempty"`
	Policy string `json:"policy,omitempty"`

	// LaneMiB, LaneJobs and WaitedMS answer an acquire: the lane's size
	// (the smallest over the job's GPUs), how many jobs share it (the
	// most over its GPUs; 1 means the job has it to itself), and how long
	// the job waited for it.
	LaneMiB  int64 `json:"lane_mib,omitempty"`
	LaneJobs int   `json:"lane_jobs,omitempty"`
	WaitedMS int64 `json:"waited_ms,omitempty"`

	// EMiB answers a release: the E the job holds after the correction
	// from its measured peaks. Tight is set when the correction wanted a
	// larger lane than the safety condition allows.
	EMiB  int64 `json:"e_mib,omitempty"`
	Tight bool  `json:"tight,omitempty"`
}

// ErrProtocol is wrapped by every error ParseRequest returns.
var ErrProtocol = errors.New("gate protocol")

// ParseRequest decodes and checks one line (without its newline): the
// version, a known op, and the fields that op needs, in range. Unknown
// fields are ignored.
func ParseRequest(line []byte) (Request, error) {
	if len(line) > MaxLineBytes {
		return Request{}, fmt.Errorf("%w: message of %d bytes, at most %d", ErrProtocol, len(line), MaxLineBytes)
	}
	var r Request
	if err := json.Unmarshal(line, &r); err != nil {
		return Request{}, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	if r.V != Version {
		return Request{}, fmt.Errorf("%w: version %d, this agent speaks %d", ErrProtocol, r.V, Version)
	}
	switch r.Op {
	case OpHello:
		if r.Job <= 0 {
			return Request{}, fmt.Errorf("%w: hello names job %d", ErrProtocol, r.Job)
		}
		if r.Token == "" || len(r.Token) > maxTokenBytes {
			return Request{}, fmt.Errorf("%w: hello token of %d bytes", ErrProtocol, len(r.Token))
		}
	case OpAcquire:
		if r.ExpectedEMiB < 0 || r.ExpectedEMiB > maxMiB {
			return Request{}, fmt.Errorf("%w: expected_e_mib %d out of range", ErrProtocol, r.ExpectedEMiB)
		}
	case OpRelease:
		if r.PeakEMiB < 0 || r.PeakEMiB > maxMiB {
			return Request{}, fmt.Errorf("%w: peak_e_mib %d out of range", ErrProtocol, r.PeakEMiB)
		}
	default:
		return Request{}, fmt.Errorf("%w: unknown op %q", ErrProtocol, r.Op)
	}
	return r, nil
}
