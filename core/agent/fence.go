package agent

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

// Self-fencing. An agent that has not heard any server for longer than the
// heartbeat timeout the server announced stops its own runs (SIGTERM, then
// SIGKILL after the grace period), because by then the server may have
// taken its machines for lost and will start their jobs elsewhere once the
// timeout and the grace period have passed (docs/agents.md, "A job runs
// once"). So a partition never leaves two copies of a job running.
//
// The server pings every T/20 and, while its runs are leased, the agent
// tries to reconnect every T/40 (leaseRetry): a server restart shorter
// than about 0.9 T costs no run (the lease has at least 0.95 T left when
// the server stops; docs/agents.md, "Server restarts").

// hear records that a server was heard now, and renews the watchdog's
// lease to the heartbeat timeout from now. A silence longer than the
// timeout is remembered: runs that ended within it were fenced.
func (c *Client) hear() {
	now := time.Now()
	old := c.heard.Swap(now.UnixNano())
	prev := time.Unix(0, old)
	if t := time.Duration(c.timeout.Load()); t > 0 {
		// Before the first server was heard nothing was leased: no
		// silence to remember (a span from 1970 would count every exit
		// in the grace after the first connection as fenced).
		// The silence fenced from when the timeout passed, or from when the
		// watchdog's lease ran out if that was first: it is renewed at
		// most every fifth of a second, so it may end that much before the
		// timeout, and a silence between the two was not remembered (the
		// watchdog's run was then failed: the 30-minute soak, issue 32).
		start := prev.Add(t)
		if d := c.cfg.Watchdog.Deadline(); !d.IsZero() && d.Before(start) {
			start = d
		}
		if old != 0 && now.After(start) {
			c.fmu.Lock()
			c.fencedSpans = append(c.fencedSpans, [2]time.Time{start, now})
			if len(c.fencedSpans) > 16 {
				c.fencedSpans = c.fencedSpans[1:]
			}
			c.fmu.Unlock()
		}
		c.cfg.Watchdog.Lease(now.Add(t))
	}
}

// fencedErr is why a fenced run ended.
const fencedErr = "stopped by its agent, which heard no server for longer than the heartbeat timeout"

// graceOf is the time node's runs have to end after SIGTERM before they
// are killed; 0 for a node the client does not know.
func (c *Client) graceOf(node string) time.Duration {
	for _, n := range c.cfg.Nodes {
		if n.Name() == node {
			return n.cfg.Grace
		}
	}
	return 0
}

// fencedAt reports whether at fell in a time when runs were being fenced:
// no server heard for longer than the timeout, now or in a silence since
// ended, or within grace after such a silence ended (a run sent SIGTERM
// in it may take that long to die, after a server was heard again). The
// watchdog's lease, renewed at most every fifth of a second, may end that
// much earlier.
func (c *Client) fencedAt(at time.Time, grace time.Duration) bool {
	timeout := time.Duration(c.timeout.Load())
	if timeout <= 0 {
		return false
	}
	const slack = 250 * time.Millisecond
	if at.Sub(time.Unix(0, c.heard.Load())) > timeout-slack {
		return true
	}
	c.fmu.Lock()
	defer c.fmu.Unlock()
	for _, s := range c.fencedSpans {
		if !at.Before(s[0].Add(-slack)) && !at.After(s[1].Add(grace+slack)) {
			return true
		}
	}
	return false
}

// fencing reports whether no server has been heard for longer than the
// heartbeat timeout: runs are being stopped.
func (c *Client) fencing() bool {
	timeout := time.Duration(c.timeout.Load())
	if timeout <= 0 {
		return false
	}
	now := time.Now()
	if d := c.cfg.Watchdog.Deadline(); !d.IsZero() && now.After(d) {
		return true // the watchdog's lease, renewed less often, ran out first
	}
	return now.Sub(time.Unix(0, c.heard.Load())) > timeout
}

// maxBackoff is the longest wait between connection attempts: the
// configured one, but at most a quarter of the heartbeat timeout once a
// server announced one.
// leaseRetry is the wait between connection attempts while the runs'
// lease holds (a server heard within the heartbeat timeout T): T/40,
// between 50 ms and MinBackoff, so that a restarted server is found
// within a small part of the lease; 0 once the lease ran out (or before
// any server was heard), when the backoff applies.
func (c *Client) leaseRetry() time.Duration {
	t := time.Duration(c.timeout.Load())
	heard := c.heard.Load()
	if t <= 0 || heard == 0 || time.Since(time.Unix(0, heard)) >= t {
		return 0
	}
	return min(max(t/40, 50*time.Millisecond), c.cfg.MinBackoff)
}

func (c *Client) maxBackoff() time.Duration {
	b := c.cfg.MaxBackoff
	if t := time.Duration(c.timeout.Load()); t > 0 {
		b = min(b, max(t/4, c.cfg.MinBackoff))
	}
	return b
}

// fenceEvery is how often the client checks whether it must fence.
const fenceEvery = 200 * time.Millisecond

// fence stops every run of every machine whenever no server has been heard
// for longer than the heartbeat timeout, until ctx ends.
func (c *Client) fence(ctx context.Context) {
	tick := time.NewTicker(fenceEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !c.fencing() {
			continue // heard lately, or never welcomed: no server can have given a run to anyone else
		}
		timeout := time.Duration(c.timeout.Load())
		silent := time.Since(time.Unix(0, c.heard.Load()))
		for _, n := range c.cfg.Nodes {
			for _, ref := range n.Running() {
				if n.fenced(ref) {
					continue
				}
				c.cfg.Logger.Warn("no server heard for longer than the heartbeat timeout: stopping the run, which the server may start elsewhere",
					"job", ref.Job, "run", ref.Run, "node", n.Name(), "silent", silent.Round(time.Millisecond), "timeout", timeout)
				_ = n.Stop(ctx, ref)
			}
		}
	}
}

// fenced reports whether ref was already stopped for fencing, and marks
// it so: the warning is said once per run.
func (a *Local) fenced(ref job.RunRef) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.runs[ref.Job]
	if !ok || r.id != ref.Run {
		return true
	}
	was := r.fenced
	r.fenced = true
	return was
}
