package engine

import "time"

// The waits of jobs, for Stats.SubmitToStart and Stats.QueueWait. A job
// waits for its first run from its submission; for a later run, from
// when its last run ended and it waited again (or its retry backoff
// ended, whichever is later). The engine notes that moment where it
// records the job waiting again; a job that was already waiting again
// when the server started has no known wait, and its next start adds
// only to SubmitToStart if it is its first.

// waitFrom notes that job id waits again from t.
func (e *Engine) waitFrom(id int64, t time.Time) { e.waiting[id] = t }

// forgetWaits forgets the jobs that no longer wait (cancelled, or
// started elsewhere), given the jobs of the pass: the few that wait again
// are looked up, not a set of every job made.
func (e *Engine) forgetWaits(jobs *passJobs) {
	for id := range e.waiting {
		if i, ok := jobs.find(id); !ok || !jobs.jobs[i].State.Waiting() {
			delete(e.waiting, id)
		}
	}
}

// observeStart records the waits of j, which starts at now.
func (e *Engine) observeStart(j Job, now time.Time) {
	first := j.Run == 0
	waited := time.Duration(-1)
	if first {
		waited = max(0, now.Sub(j.SubmittedAt))
	} else if from, ok := e.waiting[j.ID]; ok {
		if j.RetryAt != nil && j.RetryAt.After(from) {
			from = *j.RetryAt
		}
		waited = max(0, now.Sub(from))
	}
	delete(e.waiting, j.ID)
	e.stats.started(QueueTeam{Queue: j.Queue.Index, Team: j.Team}, first, now.Sub(j.SubmittedAt), waited)
}
