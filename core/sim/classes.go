package sim

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/gpuportal/gpuportal/core/sched"
)

// ClassResult reports how a run treated each class of job (sched.Class),
// when the trace has interactive sessions (trace.Job.Class): how often
// sessions were preempted, and how the batch jobs did beside them.
type ClassResult struct {
	Sessions int `json:"sessions"`
	// SessionPreemptions counts the preemptions of sessions: those the
	// policy made and reclaims alike.
	SessionPreemptions int `json:"session_preemptions"`
	// SessionsReclaimed counts the sessions' preemptions that were
	// reclaims (Preempt.Reclaim): a team under its guarantee took its
	// GPUs back when no batch job that borrowed could free enough.
	SessionsReclaimed int     `json:"sessions_reclaimed"`
	SessionAvgPending float64 `json:"session_avg_pending_s"`
	// Batch jobs: how many, their average JCT and pending time, over
	// the finished ones.
	Batch           int     `json:"batch"`
	BatchAvgJCT     float64 `json:"batch_avg_jct_s"`
	BatchAvgPending float64 `json:"batch_avg_pending_s"`
}

// jobClass reads a trace job's class (validated by newSimulator).
func jobClass(class string) (sched.Class, error) {
	c, err := sched.ParseClass(class)
	if err != nil {
		return 0, fmt.Errorf("class: %w", err)
	}
	return c, nil
}

// classResult computes ClassResult; nil when no job is a session.
func (s *simulator) classResult() *ClassResult {
	r := &ClassResult{SessionPreemptions: s.sessionPreempts, SessionsReclaimed: s.sessionReclaims}
	var sessionPending, batchJCT, batchPending float64
	var sessionsDone, batchDone int
	for i := range s.jobs {
		j := &s.jobs[i]
		session := j.class == sched.ClassSession
		if session {
			r.Sessions++
		} else {
			r.Batch++
		}
		if !j.done {
			continue
		}
		jct := j.finish - j.tj.Submit
		if session {
			sessionsDone++
			sessionPending += jct - j.tj.Duration
			continue
		}
		batchDone++
		batchJCT += jct
		batchPending += jct - j.tj.Duration
	}
	if r.Sessions == 0 {
		return nil
	}
	if sessionsDone > 0 {
		r.SessionAvgPending = sessionPending / float64(sessionsDone)
	}
	if batchDone > 0 {
		r.BatchAvgJCT = batchJCT / float64(batchDone)
		r.BatchAvgPending = batchPending / float64(batchDone)
	}
	return r
}

// writeClassTable prints, for runs whose trace has sessions, one row per
// policy: sessions and their preemptions, batch jobs and their JCT.
func writeClassTable(w io.Writer, results []*Result) error {
	has := false
	for _, r := range results {
		has = has || r.Classes != nil
	}
	if !has {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tsessions\tsession preemptions\tof which reclaims\tsession avg pending s\tbatch jobs\tbatch avg JCT s\tbatch avg pending s\t")
	for _, r := range results {
		c := r.Classes
		if c == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%d\t%.0f\t%.0f\t\n", r.Policy, c.Sessions, c.SessionPreemptions,
			c.SessionsReclaimed, c.SessionAvgPending, c.Batch, c.BatchAvgJCT, c.BatchAvgPending)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write class table: %w", err)
	}
	return nil
}
