package kube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Jobs' output (docs/kubernetes.md, "Logs"): the output of each run's
// pod is read from the pod log API (GET .../pods/NAME/log, which the API
// server proxies to the node's kubelet) as it is written, and copied to
// the server's disk, where the portal, the API and the CLI read it as
// they read an agent's (a file they follow by offset). The copy outlives
// the pod, which gpuportal deletes once it has ended and its output is
// read to the end.

// logDrain bounds how long an ended pod is kept for the last of its
// output: past it, the pod is deleted whether or not its kubelet answered.
const logDrain = 30 * time.Second

// logPath is where the server keeps the output of rank rank of job
// jobID's latest run: DIR/JOB/output.log for the first part (the one of
// a job on one machine), DIR/JOB/output.rN.log for a gang's others.
func logPath(dir string, jobID int64, rank int) string {
	name := "output.log"
	if rank > 0 {
		name = "output.r" + strconv.Itoa(rank) + ".log"
	}
	return filepath.Join(dir, strconv.FormatInt(jobID, 10), name)
}

// LogPath is where the server keeps job jobID's output, from the pod of
// its latest run's first part; empty when output is not kept
// (Config.LogDir).
func (e *Executor) LogPath(jobID int64) string {
	if e.cfg.LogDir == "" {
		return ""
	}
	return logPath(e.cfg.LogDir, jobID, 0)
}

// logCopy copies one pod's output. Its fields are guarded by the
// executor's lock but for those of the goroutine that copies.
type logCopy struct {
	pod   string
	uid   types.UID
	jobID int64
	run   int64
	path  string
	// ended: the pod's container has ended (or the pod is gone), so the
	// next read is the last, without follow; endedAt is when it was seen.
	ended   bool
	endedAt time.Time
	// stopFollow ends the follow under way, once the pod has ended (a
	// kubelet ends it itself; KWOK's does not).
	stopFollow context.CancelFunc
	done       bool
}

// podRank is the rank of a gang's pod (its annotation), 0 otherwise.
func podRank(p *corev1.Pod) int {
	r, err := strconv.Atoi(p.Annotations[AnnotationRank])
	if err != nil || r < 0 {
		return 0
	}
	return r
}

// started reports whether pod's container has started: there is output
// to read.
func started(p *corev1.Pod) bool {
	if p.Spec.NodeName == "" {
		return false
	}
	if p.Status.Phase == corev1.PodRunning || terminal(p) {
		return true
	}
	st := containerState(p)
	return st != nil && (st.Running != nil || st.Terminated != nil)
}

// syncLogLocked starts copying the output of run r's pod p once its
// container has started, and tells the copy when it has ended; p nil:
// the pod is gone. It returns whether the pod must stay for the copy.
func (e *Executor) syncLogLocked(r *run, p *corev1.Pod, now time.Time) bool {
	if e.cfg.LogDir == "" {
		return false
	}
	c := e.logs[r.pod]
	if c != nil && r.uid != "" && c.uid != r.uid {
		c = nil // a pod of the same name before this one
	}
	if c == nil {
		if p == nil || !started(p) {
			return false
		}
		c = &logCopy{pod: r.pod, uid: p.UID, jobID: r.jobID, run: r.run, path: logPath(e.cfg.LogDir, r.jobID, podRank(p))}
		e.logs[r.pod] = c
		// The latest run of the job writes its output there; an earlier
		// run's copy stops.
		e.logOwner[c.path] = c
		go e.copyLog(e.ctx, c)
	}
	// A pod being deleted is followed until it has ended: its container
	// may write while it stops (SIGTERM).
	if (p == nil || terminal(p)) && !c.ended {
		c.ended, c.endedAt = true, now
		if c.stopFollow != nil {
			c.stopFollow()
		}
	}
	return p != nil && !c.done && now.Sub(c.endedAt) < logDrain
}

// copyLog copies c's pod's output to c.path until the pod has ended and
// its output has been read to the end, or it cannot be read (the pod is
// gone). A stream the API server or the kubelet breaks is resumed from
// the last line copied (sinceTime, the lines of the same time skipped).
func (e *Executor) copyLog(ctx context.Context, c *logCopy) {
	defer func() {
		e.mu.Lock()
		c.done = true
		if e.logOwner[c.path] == c {
			delete(e.logOwner, c.path)
		}
		e.mu.Unlock()
		e.kick()
	}()
	if err := os.MkdirAll(filepath.Dir(c.path), 0o750); err != nil {
		e.log.Error("keep a job's output", "job", c.jobID, "err", err)
		return
	}
	f, err := os.OpenFile(c.path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		e.log.Error("keep a job's output", "job", c.jobID, "err", err)
		return
	}
	defer f.Close()
	w := &logWriter{w: f, owned: func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.logOwner[c.path] == c
	}}
	backoff := time.Second
	failedLast := 0
	for ctx.Err() == nil {
		e.mu.Lock()
		last := c.ended
		fctx, cancel := context.WithCancel(ctx)
		c.stopFollow = cancel
		e.mu.Unlock()
		err := e.readLog(fctx, c, w, !last)
		cancel()
		switch {
		case err == nil && last, errors.Is(err, errNotOwner):
			return
		case errors.Is(err, context.Canceled) && ctx.Err() == nil:
			// The pod ended: the last read follows at once.
			continue
		case err == nil:
			// The follow ended on its own: the container ended (the pod's
			// status says so soon), or the stream was cut. Read on from
			// where it stopped, a moment later.
			backoff = time.Second
		case apierrors.IsNotFound(err):
			e.log.Debug("output of a pod that is gone", "pod", c.pod, "err", err)
			return
		}
		if last && err != nil {
			if failedLast++; failedLast >= 3 {
				e.log.Warn("the output of an ended pod could not be read", "job", c.jobID, "pod", c.pod, "err", err)
				return
			}
		}
		if err != nil {
			e.log.Debug("read a pod's output: trying again", "pod", c.pod, "err", err, "in", backoff)
		}
		e.waitLog(ctx, c, backoff)
		if err != nil {
			backoff = min(2*backoff, 30*time.Second)
		}
	}
}

// waitLog waits d, or less when c's pod ends meanwhile.
func (e *Executor) waitLog(ctx context.Context, c *logCopy, d time.Duration) {
	e.mu.Lock()
	wctx, cancel := context.WithTimeout(ctx, d)
	if c.ended {
		// The last reads: a second apart.
		cancel()
		wctx, cancel = context.WithTimeout(ctx, time.Second)
	}
	c.stopFollow = cancel
	e.mu.Unlock()
	<-wctx.Done()
	cancel()
}

var errNotOwner = errors.New("a later run writes the job's output")

// readLog reads c's pod's output once, with follow or to its end, from
// where w stopped, into w.
func (e *Executor) readLog(ctx context.Context, c *logCopy, w *logWriter, follow bool) error {
	opts := &corev1.PodLogOptions{Container: containerName, Follow: follow, Timestamps: true}
	if !w.last.IsZero() {
		// The API takes whole seconds: lines of that second already
		// copied are skipped.
		t := metav1.NewTime(w.last.Truncate(time.Second))
		opts.SinceTime = &t
	}
	rc, err := e.logCore().Pods(e.cfg.Namespace).GetLogs(c.pod, opts).Stream(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	return w.copyFrom(rc)
}

// logWriter writes a pod's output read with timestamps without them,
// and remembers the time of the last line written (and how many lines
// of that time), to resume after it.
type logWriter struct {
	w     io.Writer
	owned func() bool
	last  time.Time
	nLast int // lines written with time last
}

// copyFrom writes the lines of r, each "TIMESTAMP text", as text,
// skipping those written before.
func (w *logWriter) copyFrom(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	// A read resumed from last's second: the lines before last, and the
	// nLast lines of time last, were written.
	resumeFrom, skipN, seen := w.last, w.nLast, 0
	lineStart, skipping := true, false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if lineStart {
				skipping = false
				if ts, text, ok := cutTimestamp(chunk); ok {
					switch {
					case !resumeFrom.IsZero() && ts.Before(resumeFrom):
						skipping = true
					case !resumeFrom.IsZero() && ts.Equal(resumeFrom) && seen < skipN:
						seen++
						skipping = true
					default:
						if ts.Equal(w.last) {
							w.nLast++
						} else {
							w.last, w.nLast = ts, 1
						}
						chunk = text
					}
				}
			}
			if !skipping {
				if !w.owned() {
					return errNotOwner
				}
				if _, werr := w.w.Write(chunk); werr != nil {
					return fmt.Errorf("write a job's output: %w", werr)
				}
			}
			lineStart = chunk[len(chunk)-1] == '\n'
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// cutTimestamp splits "2026-11-28T12:00:00.123456789Z text" into its
// time and text.
func cutTimestamp(line []byte) (time.Time, []byte, bool) {
	i := bytes.IndexByte(line, ' ')
	if i < 20 || i > 40 {
		return time.Time{}, nil, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(line[:i]))
	if err != nil {
		return time.Time{}, nil, false
	}
	return t, line[i+1:], true
}

// logCore is the client that reads the pods' output.
func (e *Executor) logCore() *Client {
	if e.cfg.LogCore != nil {
		return e.cfg.LogCore
	}
	return e.cfg.Core
}
