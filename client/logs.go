package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gpuportal/gpuportal/api"
)

// MaxLogTail is the most output the server returns at once.
const MaxLogTail = 10 << 20

// LogTail is the last n bytes (1 to MaxLogTail) of job id's output: of
// its first machine's part, for a job on several (LogTailOn).
func (c *Client) LogTail(ctx context.Context, id int64, n int) ([]byte, error) {
	return c.LogTailOn(ctx, id, "", n)
}

// LogTailOn is LogTail of the job's part on machine node (GET
// /jobs/{id}/logs?node=), one of those it runs or ran last on; "" for
// the first.
func (c *Client) LogTailOn(ctx context.Context, id int64, node string, n int) ([]byte, error) {
	ch, err := c.logs(ctx, id, onNode(url.Values{"tail_bytes": {strconv.Itoa(n)}}, node))
	return ch.Data, err
}

// onNode is q asking for the output on machine node ("": the default).
func onNode(q url.Values, node string) url.Values {
	if node != "" {
		q.Set("node", node)
	}
	return q
}

// LogChunk is a part of a job's output read from an offset.
type LogChunk struct {
	// Data is the output from the offset asked for, at most MaxLogTail
	// bytes of it.
	Data []byte
	// Size is the whole output's size when it was read: smaller than the
	// offset asked for when the output started anew (a requeued job's
	// next run); -1 when the server did not say (LogTail of an older
	// server).
	Size int64
}

// LogsFrom is job id's output from byte offset on (GET
// /jobs/{id}/logs?offset=).
func (c *Client) LogsFrom(ctx context.Context, id int64, offset int64) (LogChunk, error) {
	return c.logsFrom(ctx, id, "", offset)
}

func (c *Client) logsFrom(ctx context.Context, id int64, node string, offset int64) (LogChunk, error) {
	ch, err := c.logs(ctx, id, onNode(url.Values{"offset": {strconv.FormatInt(offset, 10)}}, node))
	return sized(id, ch, err)
}

// logs reads job id's output as q asks, with its size then.
func (c *Client) logs(ctx context.Context, id int64, q url.Values) (LogChunk, error) {
	var h http.Header
	b, err := c.Do(ctx, http.MethodGet, jobPath(id)+"/logs", q, nil, Header(&h))
	if err != nil {
		return LogChunk{}, err
	}
	size, err := strconv.ParseInt(h.Get("X-Log-Size"), 10, 64)
	if err != nil || size < 0 {
		size = -1
	}
	return LogChunk{Data: b, Size: size}, nil
}

// sized is ch, or an error when the answer said no output size, which
// following the output needs.
func sized(id int64, ch LogChunk, err error) (LogChunk, error) {
	if err == nil && ch.Size < 0 {
		return LogChunk{}, fmt.Errorf("GET %s/logs: the answer says no output size (X-Log-Size): the server is older than this client", jobPath(id))
	}
	return ch, err
}

// Follow says how FollowLogs follows a job's output.
type Follow struct {
	// Tail is how much of the output written before the follow began is
	// written first (0: none of it; MaxLogTail at most).
	Tail int64
	// Interval is how long to wait between two reads while nothing new
	// came (default: a second).
	Interval time.Duration
	// Restarted, when set, is called when the output started anew (the
	// job was requeued and runs again) before the new run's output.
	Restarted func()
	// Node is the machine whose part's output to follow, for a job on
	// several ("": the first).
	Node string
}

// FollowLogs writes job id's output to w as it grows, by offset, until
// the job ends, and returns the job ended. It returns ctx's error when
// ctx is done first. A job that has not started yet, or whose machine is
// away for now, has no output (404): the follow waits for it.
func (c *Client) FollowLogs(ctx context.Context, id int64, w io.Writer, f Follow) (api.Job, error) {
	if f.Interval <= 0 {
		f.Interval = time.Second
	}
	offset := int64(-1) // not known yet: the first read sets it from the tail
	for {
		// The state first: output written before the job ended is all
		// there when it is read after.
		j, err := c.Job(ctx, id)
		if err != nil {
			return api.Job{}, ctxErr(ctx, err)
		}
		for {
			more, err := c.followOnce(ctx, id, w, &offset, f)
			if err != nil {
				return api.Job{}, ctxErr(ctx, err)
			}
			if !more {
				break
			}
		}
		if Ended(j) {
			return j, nil
		}
		if err := sleep(ctx, f.Interval); err != nil {
			return api.Job{}, err
		}
	}
}

// followOnce writes what lies past *offset and moves it on; more says
// that a full chunk came and more may wait.
func (c *Client) followOnce(ctx context.Context, id int64, w io.Writer, offset *int64, f Follow) (more bool, err error) {
	if *offset < 0 {
		// The first read: the tail asked for, and where it ends.
		n := min(max(f.Tail, 1), MaxLogTail)
		tail, err := c.logs(ctx, id, onNode(url.Values{"tail_bytes": {strconv.FormatInt(n, 10)}}, f.Node))
		tail, err = sized(id, tail, err)
		switch {
		case IsNotFound(err):
			// No output yet: what comes later is all new.
			*offset = 0
			return false, nil
		case err != nil:
			return false, err
		}
		// The output may have grown between the size and the read.
		start := max(0, tail.Size-n)
		if f.Tail > 0 {
			if _, err := w.Write(tail.Data); err != nil {
				return false, fmt.Errorf("write the output: %w", err)
			}
		}
		*offset = start + int64(len(tail.Data))
		return false, nil
	}
	chunk, err := c.logsFrom(ctx, id, f.Node, *offset)
	switch {
	case IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	if chunk.Size < *offset {
		// A new run's output: from its start.
		if f.Restarted != nil {
			f.Restarted()
		}
		*offset = 0
		return true, nil
	}
	if _, err := w.Write(chunk.Data); err != nil {
		return false, fmt.Errorf("write the output: %w", err)
	}
	*offset += int64(len(chunk.Data))
	return len(chunk.Data) > 0 && *offset < chunk.Size, nil
}

// Ended reports whether a job has ended: in a final state, or in a state
// this client does not know (a newer server's) with a finish time.
func Ended(j api.Job) bool {
	return j.State.Final() || (!j.State.Valid() && j.FinishedAt != nil)
}

// WaitJob asks for job id's state every interval until it ends, and
// returns it ended, or ctx's error when ctx is done first.
func (c *Client) WaitJob(ctx context.Context, id int64, interval time.Duration) (api.Job, error) {
	for {
		j, err := c.Job(ctx, id)
		if err != nil {
			return api.Job{}, ctxErr(ctx, err)
		}
		if Ended(j) {
			return j, nil
		}
		if err := sleep(ctx, interval); err != nil {
			return api.Job{}, err
		}
	}
}

// ctxErr is ctx's error once ctx is done (a request it cut short), else
// err.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}
