package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/buildinfo"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/usage"
)

// /metrics: what the portal knows, for Prometheus. Every figure a page
// also shows comes from the computation behind the page: the GPUs held
// from core/usage through a moment (convert.go), GPU readings from the
// nodes' latest samples (as the cluster page), job counts from the store.
// docs/operations.md lists every metric; deploy/ has a Grafana dashboard
// and alert rules built on them.

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("gpuportal_"+name, help, labels, nil)
}

// The labels of a GPU's series: its machine, index and UUID (as DCGM's
// Hostname, gpu and UUID), and the jobs placed on it with their users and
// teams, comma-separated in job order when jobs share it, empty when the
// GPU is not allocated.
// The label is job_id, not job: Prometheus gives "job" to the scrape job.
var gpuLabels = []string{"node", "gpu", "uuid", "job_id", "user", "team"}

var (
	jobsDesc      = desc("jobs", "Jobs by state.", "state")
	queueDesc     = desc("queue_jobs", "Unfinished jobs by priority queue, team and whether they run or wait.", "queue", "team", "status")
	gpusDesc      = desc("gpus", "GPUs of connected nodes by state: busy (a running job is placed on it), idle (free and schedulable), unavailable (free, but out of service or on a machine that takes no new jobs).", "state")
	nodesDesc     = desc("nodes", "Connected machines by state.", "state")
	passesDesc    = desc("scheduler_passes_total", "Scheduling passes run.")
	passSecsDesc  = desc("scheduler_pass_seconds_total", "Time spent in the scheduling core.")
	lastPassDesc  = desc("scheduler_last_pass_seconds", "Duration of the last scheduling pass.")
	passHistDesc  = desc("scheduler_pass_duration_seconds", "Time of each scheduling pass inside the scheduling core.")
	wholePassDesc = desc("engine_pass_duration_seconds", "Time of each whole engine pass: reading the jobs, scheduling, acting and recording.")
	phaseDesc     = desc("engine_pass_phase_seconds_total", "Time the engine's passes spent by phase: load (jobs and machines read, snapshot built), schedule (the scheduling core), apply (starts and preemptions), record (queues, shares, wait reasons, forecasts).", "phase")
	exitLagDesc   = desc("engine_exit_lag_seconds", "Time from a run's end on its machine to the store's record of it.")
	coalescedDesc = desc("engine_events_coalesced_total", "Job exits and wakes that joined a pass already due for another event (passes saved).")
	preemptDesc   = desc("preemptions_total", "Jobs the scheduler preempted, by cause (reclaim: another team took back GPUs under its guarantee; priority: the policy's order) and the preempted job's team.", "cause", "team")
	reclaimsDesc  = desc("reclaims_total", "Preemptions that gave borrowed GPUs back to a team under its guarantee, by that team.", "team")
	startsDesc    = desc("job_starts_total", "Job starts and resumes.")
	requeuesDesc  = desc("requeues_total", "Running jobs put back in the queue without counting a failure, by cause.", "cause")
	retriesDesc   = desc("retries_total", "Failed jobs started again after their backoff, by cause (exit_code: a non-zero exit; error: could not start or ended by a signal).", "cause")
	timedOutDesc  = desc("timed_out_total", "Runs stopped at their job's time limit.")
	nodeLostDesc  = desc("node_disconnects_total", "Machines that disconnected or missed their heartbeats.")
	beatsDesc     = desc("agent_heartbeats_total", "Heartbeats received from remote agents.")
	beatAgeDesc   = desc("agent_heartbeat_age_seconds", "Time since the last heartbeat of the agent that runs a machine.", "node")
	wsClientsDesc = desc("websocket_clients", "Browsers and programs following the live stream.")
	ckCopiesDesc  = desc("checkpoint_copies_total", "Copies of jobs' checkpoint folders the server made from their machines, by result (copied or failed).", "result")
	ckBytesDesc   = desc("checkpoint_copied_bytes_total", "Bytes of the checkpoint copies made (compressed, as kept).")
	ckFetchDesc   = desc("checkpoint_restores_total", "Checkpoint copies sent to machines for a run to resume from.")
	ckKeptDesc    = desc("checkpoint_copies_kept", "Checkpoint copies kept now, one per part of a running or waiting job.")
	ckKeptBDesc   = desc("checkpoint_copies_kept_bytes", "Bytes on the server's disk of the checkpoint copies kept now.")
	strayDesc     = desc("stray_runs_total", "Runs stopped because a machine came back with a run the cluster had replaced.")
	handoverDesc  = desc("handover_seconds", "Time from asking a run to stop to the start of the job that waited for its GPUs.")
	releaseDesc   = desc("release_seconds", "Time from asking a run to stop to the exit of its last process.")
	unrecDesc     = desc("unrecorded_exits", "Job exits the database has yet to take (it failed): kept, retried every pass, not yet acknowledged to agents.")
	submitDesc    = desc("job_submit_to_start_seconds", "Time from a job's submission to its first start, by the queue it started from and its team.", "queue", "team")
	waitDesc      = desc("job_queue_wait_seconds", "Time each run waited for its GPUs (from the submission, or from when the job waited again or its retry backoff ended), by queue and team.", "queue", "team")
	inUseDesc     = desc("gpus_in_use", "GPUs allocated to running jobs, a shared GPU counted by the share each job holds (as the portal shows it).")
	utilizedDesc  = desc("gpus_utilized", "GPUs running jobs keep busy: on each allocated GPU, its utilization times the share the jobs hold.")
	teamInUseDesc = desc("team_gpus_in_use", "GPUs allocated to a team's running jobs, a shared GPU counted by the share each job holds (as the teams page).", "team")
	teamUtilDesc  = desc("team_gpus_utilized", "GPUs a team's running jobs keep busy: on each GPU they hold, its utilization times their share; at most team_gpus_in_use.", "team")
	teamBorrDesc  = desc("team_gpus_borrowed", "GPUs a team holds beyond its guarantee.", "team")
	teamGuarDesc  = desc("team_gpus_guaranteed", "GPUs guaranteed to a team.", "team")
	buildDesc     = desc("build_info", "The running server's version and revision, and the Go version that built it (always 1).", "version", "revision", "goversion")

	// Per GPU, as DCGM's exporter has them (its field in brackets).
	gpuInfoDesc    = desc("gpu_info", "A GPU of a connected machine and its model (always 1).", "node", "gpu", "uuid", "model")
	gpuMemDesc     = desc("gpu_memory_used_bytes", "GPU framebuffer memory in use, bytes (DCGM_FI_DEV_FB_USED, in MiB there).", gpuLabels...)
	gpuMemResDesc  = desc("gpu_memory_reserved_bytes", "GPU framebuffer memory the driver reserves for itself, in neither used nor free, bytes (DCGM_FI_DEV_FB_RESERVED, in MiB there); 0 where the driver does not say.", gpuLabels...)
	gpuMemTotDesc  = desc("gpu_memory_total_bytes", "GPU framebuffer memory, bytes (DCGM_FI_DEV_FB_TOTAL, in MiB there).", gpuLabels...)
	gpuUtilDesc    = desc("gpu_utilization_percent", "GPU utilization, percent from 0 to 100 (DCGM_FI_DEV_GPU_UTIL).", gpuLabels...)
	gpuPowerDesc   = desc("gpu_power_usage_watts", "GPU power draw, watts (DCGM_FI_DEV_POWER_USAGE); 0 where the GPU does not report it.", gpuLabels...)
	gpuTempDesc    = desc("gpu_temperature_celsius", "GPU core temperature, degrees Celsius (DCGM_FI_DEV_GPU_TEMP); 0 where the GPU does not report it.", gpuLabels...)
	gpuECCDesc     = desc("gpu_ecc_uncorrected_errors_total", "Uncorrected (double-bit) ECC memory errors since the driver loaded (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL).", gpuLabels...)
	gpuXIDDesc     = desc("gpu_xid_errors_total", "Critical XID errors (the GPU's own faults, not an application's) seen since the agent started.", gpuLabels...)
	gpuLastXIDDesc = desc("gpu_last_xid", "The code of the last critical XID error, 0 when none (DCGM_FI_DEV_XID_ERRORS).", gpuLabels...)
	gpuAllocDesc   = desc("gpu_allocated", "The share of a GPU allocated to running jobs, from 0 (free) to 1, as core/usage counts it.", gpuLabels...)

	// Per running job and GPU.
	// Only where /metrics names users (metricsNames).
	jobShareDesc = desc("job_gpu_share", "The share of a GPU a running job holds (its page's held GPUs are their sum); without job and user labels, a team's jobs on the GPU in one series. One series per job or team: sum by (team) gives team_gpus_in_use.", "job_id", "user", "team", "node", "gpu")
	attainedDesc = desc("job_attained_service_gpu_seconds", "A running job's attained service: GPU-seconds over its runs, a shared GPU counted by its share (its page's and the API's attained_service_gpu_s).", "job_id", "user", "team")
	jobMemDesc   = desc("job_gpu_memory_used_bytes", "GPU memory a running job's processes hold on a GPU, bytes (its page's memory chart).", "job_id", "user", "team", "node", "gpu")
)

// metricsAuth requires Config.MetricsToken as a bearer token of /metrics
// when there is one, compared in constant time (of hashes, so that not
// even its length shows).
func (s *Server) metricsAuth() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if s.cfg.MetricsToken == "" {
			return next
		}
		want := sha256.Sum256([]byte(s.cfg.MetricsToken))
		return func(c echo.Context) error {
			got, ok := strings.CutPrefix(c.Request().Header.Get(echo.HeaderAuthorization), "Bearer ")
			sum := sha256.Sum256([]byte(got))
			if !ok || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="gpuportal metrics"`)
				return c.String(http.StatusUnauthorized, "/metrics needs its bearer token (serve --metrics-token-file)\n")
			}
			return next(c)
		}
	}
}

// metricsNames says whether /metrics names users and jobs in its
// per-GPU labels: only behind a token, or where the operator says so.
func (s *Server) metricsNames() bool {
	return s.cfg.MetricsToken != "" || s.cfg.MetricsUserLabels
}

// collector reads its figures when scraped, so they are never stale.
type collector struct{ s *Server }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jobsDesc, queueDesc, gpusDesc, nodesDesc, passesDesc, passSecsDesc,
		lastPassDesc, passHistDesc, wholePassDesc, phaseDesc, exitLagDesc, coalescedDesc, preemptDesc, reclaimsDesc, startsDesc, requeuesDesc, retriesDesc, timedOutDesc, nodeLostDesc,
		beatsDesc, beatAgeDesc, wsClientsDesc, ckCopiesDesc, ckBytesDesc, ckFetchDesc, ckKeptDesc, ckKeptBDesc, strayDesc, handoverDesc, releaseDesc, unrecDesc, submitDesc, waitDesc,
		inUseDesc, utilizedDesc, teamInUseDesc, teamUtilDesc, teamBorrDesc, teamGuarDesc, buildDesc,
		gpuInfoDesc, gpuMemDesc, gpuMemResDesc, gpuMemTotDesc, gpuUtilDesc, gpuPowerDesc, gpuTempDesc, gpuECCDesc, gpuXIDDesc,
		gpuLastXIDDesc, gpuAllocDesc, jobShareDesc, attainedDesc, jobMemDesc} {
		ch <- d
	}
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

func histogram(d *prometheus.Desc, h app.Histogram, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum, h.Buckets, labels...)
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a := c.s.app
	if counts, err := a.JobCounts(ctx); err == nil {
		for _, st := range job.States {
			ch <- gauge(jobsDesc, float64(counts[st]), string(st))
		}
	} else {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
	}
	// The running jobs whole, the others counted in the database: what
	// /metrics costs does not follow the queue's length (issue 33).
	m, err := c.s.app.RunningMoment(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(queueDesc, err)
		ch <- prometheus.NewInvalidMetric(gpusDesc, err)
	} else {
		if counts, err := a.QueueCounts(ctx); err == nil {
			collectQueues(ch, m, counts)
		} else {
			ch <- prometheus.NewInvalidMetric(queueDesc, err)
		}
		c.collectGPUs(ch, m, time.Now(), c.s.metricsNames())
	}
	for state, v := range a.NodeStateCounts() {
		ch <- gauge(nodesDesc, float64(v), state)
	}
	collectEngine(ch, a, m)
	var beats int64
	var copies job.CheckpointCopyStats
	if a := c.s.cfg.Agents; a != nil {
		beats = a.Heartbeats()
		for node, age := range a.HeartbeatAges(time.Now()) {
			ch <- gauge(beatAgeDesc, age.Seconds(), node)
		}
		copies = a.CheckpointCopies()
	}
	ch <- counter(beatsDesc, float64(beats))
	ch <- counter(ckCopiesDesc, float64(copies.Copied), "copied")
	ch <- counter(ckCopiesDesc, float64(copies.Failed), "failed")
	ch <- counter(ckBytesDesc, float64(copies.CopiedBytes))
	ch <- counter(ckFetchDesc, float64(copies.Fetched))
	ch <- gauge(ckKeptDesc, float64(copies.Kept))
	ch <- gauge(ckKeptBDesc, float64(copies.KeptBytes))
	ch <- gauge(wsClientsDesc, float64(c.s.hub.count()))
	ch <- gauge(buildDesc, 1, buildInfo()...)
}

// collectQueues sends the unfinished jobs by queue (counts, from
// app.App.QueueCounts) and the GPUs teams hold, as the queues and teams
// pages show them.
func collectQueues(ch chan<- prometheus.Metric, m *app.Moment, counts []app.Labeled) {
	for _, c := range counts {
		ch <- gauge(queueDesc, c.V, c.Labels...)
	}
	ch <- gauge(inUseDesc, m.Figures.InUseGPUs())
	for _, t := range m.TeamShares() {
		ch <- gauge(teamInUseDesc, t.InUseGPUs, t.Name)
		ch <- gauge(teamBorrDesc, t.BorrowedGPUs, t.Name)
		ch <- gauge(teamGuarDesc, float64(t.GuaranteeGPUs), t.Name)
	}
}

// collectGPUs sends every GPU of the connected machines: its latest
// readings (as the cluster page), who it is allocated to and how much
// of it they keep busy (core/usage, as the job and teams pages). Without
// names, a GPU's job_id and user labels are empty (its team stays) and
// the per-job series are left out.
func (c collector) collectGPUs(ch chan<- prometheus.Metric, m *app.Moment, now time.Time, names bool) {
	cl := c.s.app.Cluster(now, false)
	running := m.Running()
	users := make(map[int64]string, len(running))
	teams := make(map[int64]string, len(running))
	for _, j := range running {
		users[j.ID], teams[j.ID] = j.User, j.Team
	}
	util := make(map[string]float64) // "node:index" -> utilization from 0 to 1
	states := map[string]int{"busy": 0, "idle": 0, "unavailable": 0}
	for _, n := range cl.Machines {
		samples := make(map[int]gpu.Sample)
		for _, smp := range n.Samples {
			samples[smp.Index] = smp
		}
		unschedulable := n.State != "" && n.State != "ready"
		for _, d := range n.Devices {
			place := n.Name + ":" + strconv.Itoa(d.Index)
			held := m.Figures.OnGPU(place)
			states[gpuState(held, unschedulable || cl.Faults[app.GPUName(n.Name, d.Index)] != "")]++
			idx := strconv.Itoa(d.Index)
			ch <- gauge(gpuInfoDesc, 1, n.Name, idx, d.UUID, d.Model)
			who := holders(held, users, teams)
			if !names {
				who[0], who[1] = "", ""
			}
			labels := append([]string{n.Name, idx, d.UUID}, who...)
			share := 0.0
			byTeam := make(map[string]float64) // without names: one series per team
			for _, h := range held {
				share += h.Share
				if names {
					ch <- gauge(jobShareDesc, h.Share, strconv.FormatInt(h.Job, 10), users[h.Job], teams[h.Job], n.Name, idx)
				} else {
					byTeam[teams[h.Job]] += h.Share
				}
			}
			for team, v := range byTeam {
				ch <- gauge(jobShareDesc, v, "", "", team, n.Name, idx)
			}
			ch <- gauge(gpuAllocDesc, min(share, 1), labels...)
			smp, ok := samples[d.Index]
			if !ok {
				continue // no reading yet
			}
			util[place] = smp.UtilPct / 100
			mem := smp.MemMiB
			if mem == 0 {
				mem = d.MemMiB
			}
			ch <- gauge(gpuMemDesc, float64(smp.MemUsedMiB)*(1<<20), labels...)
			ch <- gauge(gpuMemTotDesc, float64(mem)*(1<<20), labels...)
			ch <- gauge(gpuMemResDesc, float64(smp.MemReservedMiB)*(1<<20), labels...)
			ch <- gauge(gpuUtilDesc, smp.UtilPct, labels...)
			ch <- gauge(gpuPowerDesc, smp.PowerW, labels...)
			ch <- gauge(gpuTempDesc, float64(smp.TempC), labels...)
			ch <- counter(gpuECCDesc, float64(smp.ECCErrors), labels...)
			ch <- counter(gpuXIDDesc, float64(smp.XIDErrors), labels...)
			ch <- gauge(gpuLastXIDDesc, float64(smp.LastXID), labels...)
			for _, jm := range smp.Jobs {
				if _, running := users[jm.JobID]; running && names {
					ch <- gauge(jobMemDesc, float64(jm.MemMiB)*(1<<20), strconv.FormatInt(jm.JobID, 10),
						users[jm.JobID], teams[jm.JobID], n.Name, idx)
				}
			}
		}
	}
	for state, v := range states {
		ch <- gauge(gpusDesc, float64(v), state)
	}
	if names {
		for i := range running {
			j := &running[i]
			ch <- gauge(attainedDesc, j.Service(m.Now).GPUSeconds, strconv.FormatInt(j.ID, 10), j.User, j.Team)
		}
	}
	utilized := m.Figures.Utilized(func(g string) float64 { return util[g] })
	total := 0.0
	for _, t := range m.Teams() {
		ch <- gauge(teamUtilDesc, utilized[t.Name], t.Name)
	}
	for _, v := range utilized {
		total += v
	}
	ch <- gauge(utilizedDesc, total)
}

// holders are the job, user and team labels of a GPU held by held:
// comma-separated in job order, each user and team once; empty when none.
func holders(held []usage.Holding, users, teams map[int64]string) []string {
	var ids, us, ts []string
	for _, h := range held {
		ids = append(ids, strconv.FormatInt(h.Job, 10))
		if u := users[h.Job]; !slices.Contains(us, u) {
			us = append(us, u)
		}
		if t := teams[h.Job]; !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	return []string{strings.Join(ids, ","), strings.Join(us, ","), strings.Join(ts, ",")}
}

// collectEngine sends what the engine counted; m, when not nil, names
// the teams whose counters start at 0.
func collectEngine(ch chan<- prometheus.Metric, a *app.App, m *app.Moment) {
	var teams []string
	if m != nil {
		for _, t := range m.Teams() {
			teams = append(teams, t.Name)
		}
	}
	st := a.EngineFigures(teams)
	ch <- counter(passesDesc, float64(st.Passes))
	ch <- counter(passSecsDesc, st.PassSeconds)
	ch <- gauge(lastPassDesc, st.LastPass.Seconds())
	ch <- histogram(passHistDesc, st.PassTime)
	ch <- histogram(wholePassDesc, st.WholePass)
	for _, p := range st.PhaseSeconds {
		ch <- counter(phaseDesc, p.V, p.Labels...)
	}
	ch <- histogram(exitLagDesc, st.ExitLag)
	ch <- counter(coalescedDesc, float64(st.Coalesced))
	ch <- counter(timedOutDesc, float64(st.TimedOut))
	for _, f := range []struct {
		d  *prometheus.Desc
		vs []app.Labeled
	}{{preemptDesc, st.Preempted}, {reclaimsDesc, st.Reclaimed}, {requeuesDesc, st.RequeuedBy}, {retriesDesc, st.RetriedBy}} {
		for _, v := range f.vs {
			ch <- counter(f.d, v.V, v.Labels...)
		}
	}
	for _, h := range st.SubmitToStart {
		ch <- histogram(submitDesc, h.H, h.Labels...)
	}
	for _, h := range st.QueueWait {
		ch <- histogram(waitDesc, h.H, h.Labels...)
	}
	ch <- counter(startsDesc, float64(st.Starts))
	ch <- counter(nodeLostDesc, float64(st.NodesRemoved))
	ch <- counter(strayDesc, float64(st.StrayRuns))
	ch <- prometheus.MustNewConstSummary(handoverDesc, uint64(st.Handovers), st.HandoverSeconds, nil)
	ch <- prometheus.MustNewConstSummary(releaseDesc, uint64(st.Releases), st.ReleaseSeconds, nil)
	ch <- gauge(unrecDesc, float64(st.UnrecordedExits))
}

// buildInfo is the version, revision and Go version of the running
// binary (core/buildinfo, as --version and GET /api/v1/version say
// them): the release's version ("dev" for a build from a checkout) and
// the VCS revision, with "-dirty" when the tree had changes ("unknown"
// where it has none).
func buildInfo() []string {
	in := buildinfo.Read()
	revision := "unknown"
	if in.Revision != "" {
		revision = in.Revision
		if in.Modified {
			revision += "-dirty"
		}
	}
	return []string{in.Version, revision, in.GoVersion}
}

// gpuState is what a GPU is doing, by allocation, as /metrics
// (gpuportal_gpus) and the cluster page both say: "busy" when running
// jobs are placed on it (held: usage.Figures.OnGPU), whatever memory
// they have allocated yet; else "unavailable" when its machine takes no
// jobs or it reported a fault; else "idle".
func gpuState(held []usage.Holding, unavailable bool) string {
	switch {
	case len(held) > 0:
		return "busy"
	case unavailable:
		return "unavailable"
	}
	return "idle"
}
