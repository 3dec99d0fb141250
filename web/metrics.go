package web

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuportal/gpuportal/core/job"
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("gpuportal_"+name, help, labels, nil)
}

var (
	jobsDesc      = desc("jobs", "Jobs by state.", "state")
	queueDesc     = desc("queue_jobs", "Unfinished jobs by priority queue, team and whether they run or wait.", "queue", "team", "status")
	gpusDesc      = desc("gpus", "GPUs of connected nodes by state (busy: some job holds memory on it).", "state")
	gpuMemDesc    = desc("gpu_memory_used_bytes", "GPU memory in use.", "node", "gpu")
	nodesDesc     = desc("nodes", "Connected machines by state.", "state")
	passesDesc    = desc("scheduler_passes_total", "Scheduling passes run.")
	passSecsDesc  = desc("scheduler_pass_seconds_total", "Time spent in the scheduling core.")
	lastPassDesc  = desc("scheduler_last_pass_seconds", "Duration of the last scheduling pass.")
	preemptDesc   = desc("preemptions_total", "Jobs the scheduler preempted.")
	startsDesc    = desc("job_starts_total", "Job starts and resumes.")
	requeuesDesc  = desc("requeues_total", "Jobs requeued because their machine was lost.")
	retriesDesc   = desc("retries_total", "Failed jobs started again.")
	timedOutDesc  = desc("timed_out_total", "Runs stopped at their job's time limit.")
	nodeLostDesc  = desc("node_disconnects_total", "Machines that disconnected or missed their heartbeats.")
	reclaimsDesc  = desc("reclaims_total", "Preemptions that gave borrowed GPUs back to a team under its guarantee.")
	beatsDesc     = desc("agent_heartbeats_total", "Heartbeats received from remote agents.")
	beatAgeDesc   = desc("agent_heartbeat_age_seconds", "Time since the last heartbeat of the agent that runs a machine.", "node")
	wsClientsDesc = desc("websocket_clients", "Browsers and programs following the live stream.")
	strayDesc     = desc("stray_runs_total", "Runs stopped because a machine came back with a run the cluster had replaced.")
	handoverDesc  = desc("handover_seconds", "Time from asking a run to stop to the start of the job that waited for its GPUs.")
	releaseDesc   = desc("release_seconds", "Time from asking a run to stop to the exit of its last process.")
	unrecDesc     = desc("unrecorded_exits", "Job exits the database has yet to take (it failed): kept, retried every pass, not yet acknowledged to agents.")
	inUseDesc     = desc("gpus_in_use", "GPUs held by running jobs, a shared GPU counted by the share each job holds (as the portal shows it).")
	teamInUseDesc = desc("team_gpus_in_use", "GPUs held by a team's running jobs, a shared GPU counted by the share each job holds.", "team")
	teamBorrDesc  = desc("team_gpus_borrowed", "GPUs a team holds beyond its guarantee.", "team")
	teamGuarDesc  = desc("team_gpus_guaranteed", "GPUs guaranteed to a team.", "team")
)

// collector reads its figures when scraped, so they are never stale.
type collector struct{ s *Server }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jobsDesc, queueDesc, gpusDesc, gpuMemDesc, nodesDesc, passesDesc, passSecsDesc,
		lastPassDesc, preemptDesc, reclaimsDesc, startsDesc, requeuesDesc, retriesDesc, timedOutDesc, nodeLostDesc, beatsDesc, beatAgeDesc,
		wsClientsDesc, strayDesc, handoverDesc, releaseDesc, unrecDesc, inUseDesc, teamInUseDesc, teamBorrDesc, teamGuarDesc} {
		ch <- d
	}
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(d *prometheus.Desc, v float64) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	store, eng := c.s.cfg.Store, c.s.cfg.Engine
	if counts, err := store.CountJobsByState(ctx); err == nil {
		for _, st := range job.States {
			ch <- gauge(jobsDesc, float64(counts[st]), string(st))
		}
	} else {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
	}
	if m, err := c.s.moment(ctx); err == nil {
		type key struct{ queue, team, status string }
		n := make(map[key]int)
		for _, j := range m.unfinished {
			status := "waiting"
			if j.State == job.Running {
				status = "running"
			}
			n[key{strconv.Itoa(j.QueueIndex), j.Team, status}]++
		}
		for k, v := range n {
			ch <- gauge(queueDesc, float64(v), k.queue, k.team, k.status)
		}
		ch <- gauge(inUseDesc, m.figures.InUseGPUs())
		for _, t := range m.teamShares() {
			ch <- gauge(teamInUseDesc, t.InUseGPUs, t.Name)
			ch <- gauge(teamBorrDesc, t.BorrowedGPUs, t.Name)
			ch <- gauge(teamGuarDesc, float64(t.GuaranteeGPUs), t.Name)
		}
	} else {
		ch <- prometheus.NewInvalidMetric(queueDesc, err)
	}
	busy, idle := 0, 0
	now := time.Now()
	for _, n := range eng.Nodes() {
		for _, smp := range n.Sample(now) {
			if len(smp.Jobs) > 0 {
				busy++
			} else {
				idle++
			}
			ch <- gauge(gpuMemDesc, float64(smp.MemUsedMiB)*(1<<20), n.Name(), strconv.Itoa(smp.Index))
		}
	}
	ch <- gauge(gpusDesc, float64(busy), "busy")
	ch <- gauge(gpusDesc, float64(idle), "idle")
	nodeStates := map[string]int{"ready": 0, "cordoned": 0, "draining": 0, "drained": 0}
	for _, st := range eng.NodeStatuses() {
		nodeStates[nodeJSON(st).State]++
	}
	for state, v := range nodeStates {
		ch <- gauge(nodesDesc, float64(v), state)
	}
	st := eng.Stats()
	ch <- counter(passesDesc, float64(st.Passes))
	ch <- counter(passSecsDesc, st.PassSeconds)
	ch <- gauge(lastPassDesc, st.LastPass.Seconds())
	ch <- counter(preemptDesc, float64(st.Preemptions))
	ch <- counter(reclaimsDesc, float64(st.Reclaims))
	ch <- counter(startsDesc, float64(st.Starts))
	ch <- counter(requeuesDesc, float64(st.Requeues))
	ch <- counter(retriesDesc, float64(st.Retries))
	ch <- counter(timedOutDesc, float64(st.TimedOut))
	ch <- counter(nodeLostDesc, float64(st.NodesRemoved))
	ch <- counter(strayDesc, float64(st.StrayRuns))
	ch <- prometheus.MustNewConstSummary(handoverDesc, uint64(st.Handovers), st.HandoverSeconds, nil)
	ch <- prometheus.MustNewConstSummary(releaseDesc, uint64(st.Releases), st.ReleaseSeconds, nil)
	ch <- gauge(unrecDesc, float64(st.UnrecordedExits))
	var beats int64
	if a := c.s.cfg.Agents; a != nil {
		beats = a.Heartbeats()
		for node, age := range a.HeartbeatAges(now) {
			ch <- gauge(beatAgeDesc, age.Seconds(), node)
		}
	}
	ch <- counter(beatsDesc, float64(beats))
	ch <- gauge(wsClientsDesc, float64(c.s.hub.count()))
}
