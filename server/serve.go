// Package server is the server assembly that gpuportal serve runs: its
// flags (Define), the store, the engine and scheduler, the agents or
// another executor, the web server, the history writer, notifications,
// and leader election among replicas.
package server

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/spf13/pflag"

	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/job"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/agent/hub"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/idle"
	"github.com/gpuportal/gpuportal/core/jobfiles"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/slurm"
	"github.com/gpuportal/gpuportal/core/telemetry"
	"github.com/gpuportal/gpuportal/enginestore"
	"github.com/gpuportal/gpuportal/history"
	"github.com/gpuportal/gpuportal/identity"
	"github.com/gpuportal/gpuportal/kube"
	"github.com/gpuportal/gpuportal/live"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/notify"
	"github.com/gpuportal/gpuportal/outbound"
	"github.com/gpuportal/gpuportal/web"
)

type serveFlags struct {
	runAs             string   // the built-in agents' jobs run as this user
	passEnv           []string // --pass-env for the built-in agents
	addr, data, db    string
	sessionKeyFile    string // --session-key-file; "": session.key in --data
	replaceSessionKey bool
	dbMaxConns        int
	dev, demo         bool
	devToken          string
	simGPUs           string
	noLocalAgent      bool
	policy            string
	sharePlacement    string
	cpuAlloc          string
	thresholds        string
	promoteKnob       float64
	forecastMaxLoad   float64 // the forecasts' Config.MaxLoad
	reference         bool
	limitsAsHints     bool
	halfLife          time.Duration
	minRuntime        time.Duration
	reserveAfter      time.Duration
	reserveLead       string
	maxReservations   int
	set               map[string]bool // flags given on the command line
	secureCookies     bool
	trustedProxies    string
	logLevel          slog.Level
	heartbeatTimeout  time.Duration
	checkpointMax     int64 // hub.Config.CheckpointMax: negative, no copies
	dbOutageHold      time.Duration
	agentToken        string
	grace             time.Duration
	simCheckpoint     time.Duration
	maxRetries        int
	retryBackoff      time.Duration
	masterPorts       engine.PortRange
	executor          string
	slurm             slurm.Flags
	kube              kube.Flags
	historyRaw        time.Duration
	historyKeep       time.Duration
	gate              agent.GateFlags
	notify            notifyFlags
	metrics           metricsFlags
	maxConnsPerAddr   int
	maxSocketsPerUser int
	wsMaxAge          time.Duration
	idleAfter         time.Duration
	idleBelow         float64
	idleReclaimGrace  time.Duration
	signIn            identity.Flags  // LDAP and OpenID Connect (docs/operations.md)
	signInCfg         identity.Config // signIn, loaded
	allowedImages     job.ImagePrefixes
	containerRuntime  string // the built-in agents' (agent --container-runtime)
	sessionOrigin     string // where sessions are served, one host each
	containerNetwork  agent.ContainerNetwork
}

// Define defines serve's flags on fs; the run it returns, once they are
// parsed, checks them and runs the portal, the API and the scheduler
// until ctx ends.
func Define(fs *pflag.FlagSet) (run func(ctx context.Context, stdout, stderr io.Writer) error) {
	var f serveFlags
	check := f.register(fs)
	return func(ctx context.Context, stdout, stderr io.Writer) error {
		if err := check(); err != nil {
			return err
		}
		return runServe(ctx, f, stdout, stderr)
	}
}

// register defines serve's flags on pfs, their values read into f;
// check, once they are parsed, completes f from them and checks it.
func (f *serveFlags) register(pfs *pflag.FlagSet) (check func() error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "address to listen on (port 0 picks a free port)")
	fs.StringVar(&f.data, "data", "./data", "folder for the SQLite database and job output")
	fs.StringVar(&f.db, "db", "", `database: "sqlite:PATH" or a "postgres://..." URL (default: SQLite in --data)`)
	fs.StringVar(&f.sessionKeyFile, "session-key-file", "", "file holding the key sessions' URL secrets and tokens are derived from, readable by the server's account only; every server of one database needs the same (default: session.key in --data, made at the first start)")
	fs.BoolVar(&f.replaceSessionKey, "replace-session-key", false, "take --session-key-file as the database's key though its sessions were made with another (a lost key file): sessions open now must be restarted")
	fs.IntVar(&f.dbMaxConns, "db-max-conns", 0, fmt.Sprintf("database connections open at most; 0: %d on PostgreSQL, %d on SQLite (readers at once, one writer at a time)", models.DefaultMaxConns, models.DefaultSQLiteConns))
	fs.BoolVar(&f.dev, "dev", false, "development mode: demo users, simulated GPUs, loopback only")
	fs.BoolVar(&f.demo, "demo", false, "with --dev: submit a stream of simulated jobs from the demo users")
	fs.StringVar(&f.devToken, "dev-token", "", "with --dev: an admin API token accepted as a bearer token")
	fs.StringVar(&f.simGPUs, "sim-gpus", "2x4x80", "simulated machines for the built-in agent: NODESxGPUSxGB")
	fs.BoolVar(&f.noLocalAgent, "no-local-agent", false, "start no built-in agent")
	fs.StringVar(&f.policy, "policy", "tiresias-l", "scheduling policy: "+strings.Join(sched.Policies(), ", "))
	fs.StringVar(&f.cpuAlloc, "cpu-alloc", sched.AllocProportional, "CPUs and host memory per job: proportional (by GPUs) or synergy (by each job's sensitivity, docs/synergy.md)")
	fs.StringVar(&f.sharePlacement, "share-placement", sched.ShareFreeFirst, "where a sharing job goes: free-first (a free GPU while one is free; a shared GPU only when none is, or when whole-GPU jobs wait for the free ones) or fullest-first (the shared GPU it leaves fullest whenever one has room); docs/salus.md")
	fs.StringVar(&f.thresholds, "thresholds", "", "queue thresholds of dlas and tiresias, comma-separated GPU-seconds (default 3250,7200; with --demo 200,800)")
	fs.DurationVar(&f.halfLife, "half-life", 7*24*time.Hour, "fair share: how fast a team's past usage fades; 0 for no decay")
	fs.DurationVar(&f.minRuntime, "min-runtime", 10*time.Minute, "fair share: how long a borrowed job runs before it may be reclaimed (with --demo, 30s)")
	fs.BoolVar(&f.reference, "reference", false, "tiresias-l and tiresias-g follow the rules traced to the Tiresias simulator's figures (queue-entry order, the one-quantum Gittins index) instead of the core's own (preempted-first, the full index); see docs/scheduling.md")
	fs.BoolVar(&f.limitsAsHints, "limits-as-hints", false, "srtf and srsf rank a job of unknown duration by its time limit less the time it has run, an upper bound on its work left (docs/scheduling.md)")
	fs.DurationVar(&f.reserveAfter, "reserve-after", 5*time.Minute, "how long at most a waiting job that cannot start waits (its age less its run time): --reserve-lead before it, it gets the GPUs that free earliest reserved, which later jobs use only if they end before then or, under a preemptive policy, give them back as backfills; by this bound it takes its GPUs back from any batch job, sharing ones too, and even from another team's guaranteed jobs started there after it was due, never from sessions (docs/scheduling.md, Reservations and Reservations under fair share); 0: no reservations")
	fs.StringVar(&f.reserveLead, "reserve-lead", "half", "with --reserve-after: how long before its bound a job is reserved, so that its GPUs drain toward it, the bound being when it must start: half (of each job's bound), or a duration such as 1m; 0: reserved at the bound, and its GPUs taken only at twice the bound")
	fs.IntVar(&f.maxReservations, "max-reservations", 1, "with --reserve-after: how many jobs hold a reservation at once, the first in priority order")
	fs.Float64Var(&f.forecastMaxLoad, "forecast-max-load", forecast.DefaultMaxLoad, "start forecasts expect jobs not yet submitted at the recent submissions' rate, but never more work a second than this share of the schedulable GPUs (each arrival's GPUs times the mean run time): a rate beyond what the cluster serves does not last; a number above 0 (docs/forecast.md)")
	fs.Float64Var(&f.promoteKnob, "promote-knob", 0, "starvation promotion: a job waiting longer than K x its run time returns to the top queue; 0 is off")
	fs.TextVar(&f.logLevel, "log-level", slog.LevelInfo, "the `level` of what is logged: debug, info, warn or error")
	fs.BoolVar(&f.secureCookies, "secure-cookies", false, "mark cookies Secure: set it when users reach the portal over HTTPS")
	fs.StringVar(&f.trustedProxies, "trusted-proxies", "", "comma-separated CIDRs of reverse proxies whose X-Forwarded-For names the client")
	fs.DurationVar(&f.heartbeatTimeout, "heartbeat-timeout", 30*time.Second, "a machine silent this long is taken for lost; its agent stops its jobs, and they are requeued once the timeout and --grace have passed again (docs/agents.md)")
	fs.DurationVar(&f.dbOutageHold, "db-outage-hold", 2*time.Minute, "with PostgreSQL: how long the leader rides out a database outage (or the loss of its lock's session), keeping its machines and their runs while it stops scheduling, before it steps down to a follower; a new leader waits as much longer before it requeues the runs of machines it has not heard (docs/operations.md, Several server replicas)")
	checkpointMax := fs.String("checkpoint-copy-max", "2GiB", "the largest checkpoint folder (bytes of files, or with KiB, MiB, GiB) the server keeps a copy of, for a job that moves to another machine to resume from (docs/agents.md, Resuming on another machine); 0: no copies")
	fs.StringVar(&f.agentToken, "agent-token", "", "token that remote agents (gpuportal agent) present; empty: no remote agents")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "time a stopped job gets between SIGTERM and SIGKILL")
	fs.DurationVar(&f.simCheckpoint, "sim-checkpoint", 0, "how long the built-in agents' simulated jobs, once asked to stop, take to save a checkpoint and exit, holding their GPUs meanwhile (killed at --grace); 0: at once (with --demo, 5s)")
	fs.StringVar(&f.runAs, "run-as", "", "user that the built-in agents' command jobs run as, or owner for each job's owner's Unix account (default: this server's user; when it is root, nobody, unless --run-as root)")
	passEnv := fs.String("pass-env", "", "variables of this server's environment that the built-in agents' jobs get besides the minimal one, comma-separated (as agent --pass-env)")
	fs.IntVar(&f.maxRetries, "max-retries", 10, "the most times a job that fails on its own is started again, whatever it asks (job submit --retries); 0 never. Machine and GPU failures are always requeued")
	fs.Func("master-ports", "FROM-TO: the ports reserved, one per run, on the first machine of a job on several machines for its rendezvous (MASTER_PORT; docs/multinode.md); default 29500-29999", func(v string) (err error) {
		f.masterPorts, err = engine.ParsePortRange(v)
		return err
	})
	fs.DurationVar(&f.retryBackoff, "retry-backoff", 30*time.Second, "wait before the first retry of a failed job; it doubles each time")
	fs.StringVar(&f.containerRuntime, "container-runtime", "", "run the built-in agents' jobs that name a container image with podman or docker (as agent --container-runtime); empty: such jobs are refused")
	fs.Var(&f.containerNetwork, "container-network", "the network of the built-in agents' container jobs: private or host (as agent --container-network)")
	allowedImages := fs.String("allowed-images", "", `prefixes of the container images jobs may name, comma-separated, such as "localhost/,registry.lab/" (a prefix without '/' names a registry); empty: any image`)
	fs.StringVar(&f.sessionOrigin, "session-origin", "", "where interactive sessions are served, each on a host of its own: a wildcard such as https://*.sessions.lab.example (DNS and a certificate for it: docs/operations.md); without a port, the portal's. Empty: on the portal's origin, sandboxed (Jupyter needs an origin of its own); with --dev, http://*.localhost")
	fs.StringVar(&f.executor, "executor", "agents", "what runs jobs: agents (gpuportal agents), slurm (a Slurm cluster: docs/slurm.md) or kubernetes (pods on a Kubernetes cluster: docs/kubernetes.md)")
	f.historyRaw, f.historyKeep = 7*24*time.Hour, 90*24*time.Hour
	fs.Var(days{&f.historyRaw}, "history-raw", "GPU history: keep per-minute rows this long, then roll them up into hours (docs/portal.md)")
	fs.Var(days{&f.historyKeep}, "history-keep", "GPU history: delete hourly rows older than this")
	fs.IntVar(&f.maxConnsPerAddr, "max-conns-per-addr", 128, "connections one client address may hold at once (trusted proxies are not capped); 0: no cap")
	fs.IntVar(&f.maxSocketsPerUser, "max-websockets-per-user", 16, "live connections (/ws) one user may hold at once")
	fs.DurationVar(&f.wsMaxAge, "websocket-max-age", time.Hour, "a live connection is closed after this long; the browser reconnects, authenticating anew")
	fs.DurationVar(&f.idleAfter, "idle-after", idle.DefaultRule.After, "a running job whose GPUs all stay under --idle-below utilization this long is flagged idle on its page, its team's and the cluster's (with --demo, 2m); 1s to 24h; the default for teams that set no idle time of their own; 0: no flags for those")
	fs.DurationVar(&f.idleReclaimGrace, "idle-reclaim-grace", 30*time.Minute, "an idle interactive session (see --idle-after) is warned on its page, then stopped this long after, its GPUs given to waiting jobs; 0: never reclaim")
	fs.Float64Var(&f.idleBelow, "idle-below", idle.DefaultRule.BelowPct, "the utilization, in percent, under which a GPU counts as idle (see --idle-after): the default for teams that set no threshold of their own, and accounting's idle threshold for all")
	f.slurm.Register(fs)
	f.kube.Register(fs)
	f.gate.Register(fs)
	f.notify.register(fs)
	f.metrics.register(fs)
	f.signIn.Register(fs)
	pfs.AddGoFlagSet(fs)
	return func() error {
		signInCfg, err := f.signIn.Load()
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		f.signInCfg = signInCfg
		pass, err := agent.ParsePassEnv(*passEnv)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		f.passEnv = pass
		if f.checkpointMax, err = jobfiles.ParseSize(*checkpointMax); err != nil {
			return fmt.Errorf("serve: --checkpoint-copy-max %w", err)
		}
		if f.checkpointMax == 0 {
			f.checkpointMax = -1 // none
		}
		if f.allowedImages, err = job.ParseImagePrefixes(*allowedImages); err != nil {
			return fmt.Errorf("serve: --allowed-images: %w", err)
		}
		if f.containerNetwork == agent.NetworkHost && f.containerRuntime == "" {
			return errors.New("serve: --container-network host needs --container-runtime")
		}
		if err := f.gate.Check("serve"); err != nil {
			return err
		}
		if err := f.notify.check(); err != nil {
			return err
		}
		if err := f.metrics.load(); err != nil {
			return err
		}
		f.set = make(map[string]bool)
		pfs.Visit(func(fl *pflag.Flag) { f.set[fl.Name] = true })
		if f.historyKeep < f.historyRaw {
			return fmt.Errorf("serve: --history-keep %v is shorter than --history-raw %v: history must be kept at least as long as its minutes", days{&f.historyKeep}, days{&f.historyRaw})
		}
		if f.executor != "agents" && f.executor != "slurm" && f.executor != "kubernetes" {
			return fmt.Errorf("serve: --executor %q: want agents, slurm or kubernetes", f.executor)
		}
		if !slices.Contains(sched.SharePlacements(), f.sharePlacement) {
			return fmt.Errorf("serve: --share-placement %q: want %s", f.sharePlacement, strings.Join(sched.SharePlacements(), " or "))
		}
		if f.dbMaxConns < 0 || f.dbMaxConns > 1000 {
			return fmt.Errorf("serve: --db-max-conns %d: must be from 0 (the database's default) to 1000", f.dbMaxConns)
		}
		if err := idle.CheckAfter(f.idleAfter); err != nil {
			return fmt.Errorf("serve: --idle-after %w (0: no flags, but for teams that set their own)", err)
		}
		if err := idle.CheckBelow(f.idleBelow); err != nil {
			return fmt.Errorf("serve: --idle-below %w", err)
		}
		if f.idleReclaimGrace < 0 {
			return fmt.Errorf("serve: --idle-reclaim-grace %v: must not be negative", f.idleReclaimGrace)
		}
		if f.demo && !f.set["idle-after"] {
			f.idleAfter = demoIdleAfter
		}
		if f.simCheckpoint < 0 {
			return fmt.Errorf("serve: --sim-checkpoint %v: must be 0 or more", f.simCheckpoint)
		}
		if f.demo && !f.set["sim-checkpoint"] {
			f.simCheckpoint = demoSimCheckpoint
		}
		if f.sessionOrigin != "" {
			if err := web.CheckSessionOrigin(f.sessionOrigin); err != nil {
				return fmt.Errorf("serve: --session-origin %w", err)
			}
		}
		if f.maxConnsPerAddr < 0 || f.maxSocketsPerUser < 1 || f.wsMaxAge < time.Minute {
			return fmt.Errorf("serve: --max-conns-per-addr must be 0 or more, --max-websockets-per-user 1 or more, --websocket-max-age 1m or more")
		}
		if err := forecast.CheckMaxLoad(f.forecastMaxLoad); err != nil {
			return fmt.Errorf("serve: --forecast-max-load: %w", err)
		}
		// Absolute, since the built-in agents hand it (their data paths)
		// to each job's files helper, which takes absolute folders only.
		data, err := filepath.Abs(f.data)
		if err != nil {
			return fmt.Errorf("serve: --data %s: %w", f.data, err)
		}
		f.data = data
		if f.db == "" {
			f.db = "sqlite:" + filepath.Join(f.data, "gpuportal.db")
		}
		if f.dev {
			if err := checkLoopback(f.addr); err != nil {
				return err
			}
			if !f.set["session-origin"] {
				f.sessionOrigin = devSessionOrigin
			}
		} else if f.demo || f.devToken != "" {
			return errors.New("serve: --demo and --dev-token need --dev")
		}
		return nil
	}
}

// devSessionOrigin is --session-origin with --dev: browsers take any
// name under localhost for this machine, so each session is a host of
// its own with no DNS to set up.
const devSessionOrigin = "http://*.localhost"

// demoIdleAfter is --idle-after with --demo: its idle notebook is
// flagged two minutes after it starts, for a newcomer to see it.
const demoIdleAfter = 2 * time.Minute

// demoSimCheckpoint is --sim-checkpoint with --demo: a preempted demo job
// holds its GPUs while it "saves its checkpoint", as a training job does,
// so the demo shows the handover (the victim leaving, the job promised
// its GPUs waiting for them) that a real cluster sees.
const demoSimCheckpoint = 5 * time.Second

// demoThresholds are the queue thresholds of --demo: its jobs are short,
// so the queues must be too for a newcomer to see demotions and preemptions.
var demoThresholds = []float64{200, 800}

// demoMinRuntime is how long a borrowed demo job runs before it may be
// reclaimed: short, so that reclaims happen while a newcomer watches.
const demoMinRuntime = 30 * time.Second

// newScheduler configures the scheduling core from the flags, and the
// learner of tiresias-g's distribution: it starts from the shipped prior
// and samples, the GPU-times of up to 5,000 jobs this cluster has
// completed (none when the database was out at start), and learns online
// (engine.Config.GPUTime), as `sim --learn-prior` does.
func newScheduler(f serveFlags, samples []float64) (*sched.Scheduler, *sched.GPUTimeLearner, error) {
	cfg, err := schedConfig(f)
	if err != nil {
		return nil, nil, err
	}
	cfg.GPUTimeSamples = samples
	sc, err := sched.New(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("--policy %s: %w", f.policy, err)
	}
	return sc, sched.NewGPUTimeLearner(samples), nil
}

// schedConfig reads the scheduling flags into a core configuration. A
// zero the user gives means what the flag says (--min-runtime 0s: no
// minimum), never the core's default for a zero field.
func schedConfig(f serveFlags) (sched.Config, error) {
	cfg := sched.Config{Policy: f.policy, PromoteKnob: f.promoteKnob, CPUAlloc: f.cpuAlloc, SharePlacement: f.sharePlacement,
		Reference: f.reference, LimitsAsHints: f.limitsAsHints,
		// A preempted job has up to --grace to checkpoint and exit before
		// its GPUs free: a reservation past its deadline takes them that
		// much early (docs/scheduling.md, rule 6).
		HandoverS: f.grace.Seconds()}
	if f.thresholds != "" {
		for _, part := range strings.Split(f.thresholds, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
			if err != nil || v <= 0 {
				return sched.Config{}, fmt.Errorf("--thresholds %q: %q is not a positive number of GPU-seconds", f.thresholds, part)
			}
			cfg.Thresholds = append(cfg.Thresholds, v)
		}
	} else if f.demo {
		cfg.Thresholds = demoThresholds
	}
	cfg.MinRuntimeS = f.minRuntime.Seconds()
	if f.demo && !f.set["min-runtime"] {
		cfg.MinRuntimeS = demoMinRuntime.Seconds()
	}
	if cfg.MinRuntimeS == 0 {
		// --min-runtime 0s means no minimum; the core reads a zero
		// MinRuntimeS as its default.
		cfg.MinRuntimeS = sched.NoMinRuntime
	}
	if f.minRuntime < 0 {
		return sched.Config{}, fmt.Errorf("--min-runtime %v: must be 0 or more", f.minRuntime)
	}
	if f.promoteKnob < 0 {
		return sched.Config{}, fmt.Errorf("--promote-knob %v: must be 0 (off) or positive", f.promoteKnob)
	}
	if f.reserveAfter < 0 {
		return sched.Config{}, fmt.Errorf("--reserve-after %v: must be 0 (no reservations) or more", f.reserveAfter)
	}
	if f.maxReservations < 1 && f.reserveAfter > 0 {
		return sched.Config{}, fmt.Errorf("--max-reservations %d: must be 1 or more", f.maxReservations)
	}
	cfg.ReserveAfterS, cfg.MaxReservations = f.reserveAfter.Seconds(), max(f.maxReservations, 0)
	switch f.reserveLead {
	case "half", "":
		cfg.ReserveLeadS = sched.LeadHalfBound
	default:
		d, err := time.ParseDuration(f.reserveLead)
		if f.reserveLead == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 {
			return sched.Config{}, fmt.Errorf("--reserve-lead %q: want half, 0 or a duration such as 1m", f.reserveLead)
		}
		cfg.ReserveLeadS = d.Seconds()
	}
	if !slices.Contains(sched.CPUAllocModes(), f.cpuAlloc) {
		return sched.Config{}, fmt.Errorf("--cpu-alloc %q: want %s", f.cpuAlloc, strings.Join(sched.CPUAllocModes(), " or "))
	}
	if f.halfLife < 0 {
		return sched.Config{}, fmt.Errorf("--half-life %v: must be 0 (no decay) or more", f.halfLife)
	}
	return cfg, nil
}

// checkLoopback refuses development mode on an address others can reach:
// its users have well-known passwords.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("serve: --addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("serve: --dev listens on loopback only (its users have known passwords), not %q", addr)
}

// dbAnswers is how long serve waits at start for the database to answer
// before it starts as in an outage (startFenced).
const dbAnswers = 5 * time.Second

// runServe runs the server serve's flags describe until ctx ends: the
// store, the engine and the hub machines connect to, what only the
// leader runs, and the front people reach.
func runServe(ctx context.Context, f serveFlags, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: f.logLevel}))
	lp, err := newLeaderParts(f, log)
	if err != nil {
		return err
	}
	store, outage, err := openStore(ctx, f)
	if err != nil {
		return err
	}
	defer store.Close()
	samples, err := prepareStore(ctx, f, store, outage, stdout, log)
	if err != nil {
		return err
	}
	rep := newReplica(store, f.dbOutageHold, log)
	eng, err := newEngine(f, store, rep, samples, log)
	if err != nil {
		return err
	}
	engCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	agents := hub.New(hub.Config{Token: f.agentToken, HeartbeatTimeout: f.heartbeatTimeout, Dir: filepath.Join(f.data, "agents"),
		Machines: machineStore{store}, CheckpointDir: filepath.Join(f.data, "checkpoints"), CheckpointMax: f.checkpointMax, Jobs: jobStates{store}}, eng, log)
	lp.store, lp.eng, lp.agents = store, eng, agents
	lead := func() error { return lp.lead(engCtx) }
	if outage != nil {
		rep.startFenced(ctx, eng, outage)
	} else if err := rep.start(ctx, eng); err != nil {
		return err
	}
	defer rep.release()
	if rep.leader() || outage != nil {
		if err := lead(); err != nil {
			return err
		}
	}

	rec := startTelemetry(engCtx, eng, store, log)
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.addr, err)
	}
	front, err := newFront(f, ln, store, eng, agents, rep, rec, log)
	if err != nil {
		ln.Close()
		return err
	}
	fronts := front.run(engCtx)
	httpSrv := front.srv.HTTPServer()
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpSrv.Serve(front.srv.LimitConnections(ln)) }()
	fmt.Fprintf(stdout, "gpuportal listening on http://%s\n", ln.Addr())
	log.Info("serving", "addr", ln.Addr().String(), "policy", f.policy, "dev", f.dev)

	leadErr := rep.follow(engCtx, lead)
wait:
	for {
		select {
		case <-ctx.Done():
			log.Info("shutting down")
			break wait
		case err := <-serveErr:
			return fmt.Errorf("serve http: %w", err)
		case err := <-leadErr:
			return err
		case err := <-rep.down:
			leadErr = rep.stepDownTo(engCtx, err, agents, &lp.work, eng, lead)
		}
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), f.grace+5*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(shutCtx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	stopEngine()
	fronts.wait() // the minute in progress is written before the store closes
	lp.work.stop(shutCtx, log)
	return nil
}

// newEngine makes the engine over store with the scheduler --policy
// names, learning from samples; rep confirms that this replica still
// leads before each decision is applied.
func newEngine(f serveFlags, store *models.Store, rep *replica, samples []float64, log *slog.Logger) (*engine.Engine, error) {
	scheduler, learner, err := newScheduler(f, samples)
	if err != nil {
		return nil, err
	}
	var takeover time.Duration
	if store.Replicated() {
		takeover = takeoverHold(f.dbOutageHold)
	}
	return engine.New(engine.Config{Store: enginestore.New(store), Scheduler: scheduler, GPUTime: learner, Logger: log,
		LostAfter: engine.FenceBound(f.heartbeatTimeout, f.grace), MaxRetries: f.maxRetries, RetryBackoff: f.retryBackoff, HalfLife: engineHalfLife(f.halfLife),
		MasterPorts: f.masterPorts, Confirm: rep.confirm, TakeoverHold: takeover,
		Forecast: f.forecastConfig()})
}

// forecastConfig is the engine's forecasts' configuration from the
// flags; the rest are the engine's defaults.
func (f serveFlags) forecastConfig() engine.ForecastConfig {
	return engine.ForecastConfig{Forecaster: forecast.Config{MaxLoad: f.forecastMaxLoad}}
}

// openStore opens the database --db names. outage is why it does not
// answer yet, when it is a replicated store that is out: a PostgreSQL that
// does not answer is an outage this server rides out from the start
// (serve_leader.go, startFenced): it serves what it can, lets in the
// machines it checked before and keeps their runs going, and leads once
// the database answers and the lock is its own. A database that does not
// answer within dbAnswers is out: a machine gone from the network would
// hold the start for minutes, past the agents' lease. err is any other
// failure, which stops the start.
func openStore(ctx context.Context, f serveFlags) (store *models.Store, outage, err error) {
	// Only a key file the server makes itself is made: one named on the
	// command line that is missing is a mistake (a replica's mount).
	key, err := models.LoadSessionKey(cmp.Or(f.sessionKeyFile, filepath.Join(f.data, "session.key")), f.sessionKeyFile == "")
	if err != nil {
		return nil, nil, fmt.Errorf("serve: --session-key-file: %w", err)
	}
	store, err = models.OpenLater(f.db, models.Options{MaxConns: f.dbMaxConns, SessionKey: &key, ReplaceSessionKey: f.replaceSessionKey})
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, dbAnswers)
	outage = store.Ping(pctx)
	cancel()
	if outage == nil {
		outage = store.Ready(ctx)
	} else {
		outage = fmt.Errorf("open database %s: %w", models.RedactDSN(f.db), outage)
	}
	if outage != nil && (!store.Replicated() || !models.Unavailable(outage)) {
		store.Close()
		if errors.Is(outage, models.ErrSessionKeyMismatch) {
			return nil, nil, fmt.Errorf("serve: --session-key-file: %w (--replace-session-key)", outage)
		}
		return nil, nil, outage
	}
	return store, outage, nil
}

// prepareStore says whether the store answers and, when it does, seeds
// the demo (--dev) and returns the completed jobs' GPU-times, for the
// scheduler to learn from.
func prepareStore(ctx context.Context, f serveFlags, store *models.Store, outage error, stdout io.Writer, log *slog.Logger) ([]float64, error) {
	if outage != nil {
		log.Error("the database does not answer: serving fenced until it does; machines this server checked before may reconnect, their runs go on",
			"db", models.RedactDSN(f.db), "err", outage, "hold", f.dbOutageHold.String())
		return nil, nil
	}
	samples, err := store.CompletedGPUTimes(ctx, 5000)
	if err != nil {
		return nil, err
	}
	log.Info("database ready", "db", models.RedactDSN(f.db))
	if f.dev {
		if err := seedDemo(ctx, store, stdout); err != nil {
			return nil, err
		}
	}
	return samples, nil
}

// leaderParts is what only the leader runs (serve_leader.go): the
// engine's loop, the Slurm or Kubernetes executor, the dev machines and
// the demo. With SQLite, or when no other replica leads, it starts at
// once; a leader that steps down stops it (leaderWork.stop) and may lead
// again later.
type leaderParts struct {
	f          serveFlags
	log        *slog.Logger
	localAgent bool
	cluster    gpu.SimCluster
	store      *models.Store
	eng        *engine.Engine
	agents     *hub.Hub
	work       leaderWork
}

// newLeaderParts checks the flags serve reads before it opens the store
// and returns the leader's parts, the store, engine and hub still to be
// set.
func newLeaderParts(f serveFlags, log *slog.Logger) (*leaderParts, error) {
	if l := f.signInCfg.LDAP; l.Cleartext() {
		log.Warn("LDAP without TLS (--ldap-insecure): passwords typed at sign-in, and the service account's, cross the network in clear; "+
			"use ldaps:// or --ldap-start-tls", "url", l.URL)
	}
	if f.maxRetries < 0 {
		return nil, fmt.Errorf("--max-retries %d: must be 0 or more", f.maxRetries)
	}
	if f.dbOutageHold <= 0 {
		return nil, fmt.Errorf("--db-outage-hold %v: must be positive", f.dbOutageHold)
	}
	p := &leaderParts{f: f, log: log, localAgent: !f.noLocalAgent && f.dev && f.executor == "agents"}
	if p.localAgent {
		var err error
		if p.cluster, err = gpu.ParseSimCluster(f.simGPUs); err != nil {
			return nil, fmt.Errorf("--sim-gpus %w", err)
		}
	}
	return p, nil
}

// lead starts the leader's parts under engCtx.
func (p *leaderParts) lead(engCtx context.Context) error {
	leadCtx := p.work.begin(engCtx)
	p.agents.Accept()
	engDone := make(chan error, 1)
	go func() { engDone <- p.eng.Run(leadCtx) }()
	p.work.engineRuns(engDone)
	switch p.f.executor {
	case "slurm":
		if err := p.f.slurm.Start(leadCtx, p.f.data, p.f.grace, p.eng, p.log.With("executor", "slurm")); err != nil {
			return err
		}
	case "kubernetes":
		if err := p.f.kube.Start(leadCtx, p.f.data, p.f.grace, p.eng, p.log.With("executor", "kubernetes")); err != nil {
			return err
		}
	}
	if p.localAgent {
		if err := startLocalAgents(leadCtx, p.f, p.cluster, p.eng, &p.work, p.log); err != nil {
			return err
		}
	}
	if p.f.demo {
		go runDemo(leadCtx, p.store, p.eng, p.log)
	}
	return nil
}

// startTelemetry records the machines' GPU readings, once a second, with
// the jobs that hold each GPU, until ctx ends.
func startTelemetry(ctx context.Context, eng *engine.Engine, store *models.Store, log *slog.Logger) *telemetry.Recorder {
	rec := telemetry.New(historyWindow, 2000)
	go rec.Run(ctx, func() []telemetry.Source {
		nodes := eng.Nodes()
		out := make([]telemetry.Source, len(nodes))
		for i, n := range nodes {
			out[i] = n
		}
		return out
	}, heldGPUs(store), time.Second, func(err error) { log.Warn("GPU readings without their jobs", "err", err) })
	return rec
}

// front is what serves people: the web server over the app's actions,
// the live stream's publisher, the GPU history writer and the notifier.
type front struct {
	srv      *web.Server
	pub      *live.Publisher
	hist     *history.Writer
	notifier *notify.Notifier
	leader   func() bool
}

// newFront assembles the front for the server listening on ln.
func newFront(f serveFlags, ln net.Listener, store *models.Store, eng *engine.Engine, agents *hub.Hub, rep *replica,
	rec *telemetry.Recorder, log *slog.Logger) (*front, error) {
	proxies, err := parseCIDRs(f.trustedProxies)
	if err != nil {
		return nil, err
	}
	mailer, err := f.notify.mailer(os.Getenv)
	if err != nil {
		return nil, err
	}
	// Notifications go out from the leader only (serve_notify.go);
	// webhooks never to this server itself, nor where --webhook-allow
	// does not allow.
	webhooks := f.notify.webhooks.WithOwn(outbound.OwnAddrs(ln.Addr())...)
	notifier, err := notify.New(notify.Config{Store: store, Leader: rep.leader, PublicURL: f.notify.linkBase(ln.Addr()),
		Mailer: mailer, WebhookTimeout: f.notify.webhookTimeout, Webhooks: webhooks, RetryBase: f.notify.retryBase, HeldEvery: f.notify.heldCheck, Logger: log.With("part", "notify")})
	if err != nil {
		return nil, err
	}
	// The live stream's frames and the GPU history, from the machines'
	// readings; the web server sends the one and reads the other.
	pub := live.New(live.Config{Telemetry: rec, Logger: log})
	hist := history.New(history.Config{Store: store, Telemetry: rec, Nodes: eng, Logger: log, Leader: rep.leader,
		IdleBelowPct: f.idleBelow, Raw: f.historyRaw, Keep: f.historyKeep})
	// What users and admins do, over the store and the engine; a change
	// of someone's access tells the web server's live connections.
	accessChanged := make(chan struct{}, 1)
	actions := app.New(app.Config{Store: store, Engine: eng, Telemetry: rec, Logger: log, Leader: rep.leader,
		Idle:         idle.Rule{After: f.idleAfter, BelowPct: f.idleBelow},
		ReclaimGrace: f.idleReclaimGrace, AllowedImages: f.allowedImages, AccessChanged: app.Signal(accessChanged), Heard: agents.HeartbeatAges,
		Copies: agents.CheckpointCopiesOf})
	srv, err := web.New(web.Config{App: actions, AccessChanged: accessChanged, Telemetry: rec, Live: pub, Logger: log, DevToken: f.devToken,
		SecureCookies: f.secureCookies, TrustedProxies: proxies, Leader: rep.leader,
		DataDir: f.data, MaxConnsPerAddr: cmp.Or(f.maxConnsPerAddr, -1), MaxSocketsPerUser: f.maxSocketsPerUser, SocketMaxAge: f.wsMaxAge,
		Agents: agents, SignIn: f.signInCfg, Notifier: notifier, EmailEnabled: mailer != nil, Webhooks: webhooks,
		Collectors: slices.Concat(notifier.Collectors(), pub.Collectors(), hist.Collectors()), AccountingIdleBelowPct: f.idleBelow,
		SessionOrigin: f.sessionOrigin, PortalURL: f.notify.linkBase(ln.Addr()),
		MetricsToken: f.metrics.token, MetricsUserLabels: f.metrics.userLabels})
	if err != nil {
		return nil, err
	}
	return &front{srv: srv, pub: pub, hist: hist, notifier: notifier, leader: rep.leader}, nil
}

// running is the front's loops under way; wait returns when those that
// write (the history, the notifier, the reclaimer) have ended.
type running struct{ history, notify, reclaim chan struct{} }

// run starts the front's loops until ctx ends (the HTTP server is the
// caller's).
func (fr *front) run(ctx context.Context) running {
	r := running{make(chan struct{}), make(chan struct{}), make(chan struct{})}
	go fr.pub.Run(ctx)
	go fr.srv.Run(ctx)
	go func() { fr.hist.Run(ctx); close(r.history) }()
	go func() { fr.notifier.Run(ctx); close(r.notify) }()
	go func() { fr.srv.RunReclaim(ctx, fr.leader, time.Second); close(r.reclaim) }()
	return r
}

func (r running) wait() {
	<-r.history
	<-r.notify
	<-r.reclaim
}

// startLocalAgents connects the built-in agents' simulated machines
// (serve --dev) to the engine, which runs. Their command jobs never run
// as root unless --run-as root says so: a server that runs as root runs
// them as nobody.
func startLocalAgents(ctx context.Context, f serveFlags, cluster gpu.SimCluster, eng *engine.Engine, work *leaderWork, log *slog.Logger) error {
	var owners func(string) (agent.User, error)
	var ownersGroups []uint32
	if f.runAs == "" && os.Geteuid() == 0 {
		// Each user's jobs run as an account of their own, never as root,
		// nor as one account shared by all (whose jobs could read each
		// other's processes and tokens).
		accounts := &devAccounts{homes: filepath.Join(f.data, "homes"), log: log}
		if err := accounts.setup(f.data, filepath.Join(f.data, "agents"), accounts.homes, devUserData(f.data)); err != nil {
			return err
		}
		f.runAs, owners, ownersGroups = agent.RunAsOwner, accounts.lookup, []uint32{uint32(accounts.group)}
		log.Warn("serve runs as root: the built-in agents run each user's command jobs as a Unix account of their own, " +
			devAccountPrefix + "NAME, made on first use (pass --run-as USER or owner to choose, or --run-as root to allow root)")
	}
	if f.runAs != "" && f.runAs != "root" && owners == nil {
		// The jobs' accounts pass through the data folder to their own
		// jobs' folders, and read nothing else of it.
		for _, dir := range []string{f.data, filepath.Join(f.data, "agents"), filepath.Join(f.data, "homes"), devUserData(f.data)} {
			if err := passOnly(dir); err != nil {
				return err
			}
		}
	}
	var containers *agent.ContainerConfig
	if f.containerRuntime != "" {
		v, err := agent.CheckContainerRuntime(ctx, f.containerRuntime)
		if err != nil {
			return fmt.Errorf("serve: --container-runtime %w", err)
		}
		containers = &agent.ContainerConfig{Runtime: f.containerRuntime, Network: f.containerNetwork} // simulated GPUs: no devices
		// srun for their jobs: gpuportal-srun beside this binary, if there.
		if containers.Srun, err = agent.ContainerSrun("", log); err != nil {
			return fmt.Errorf("serve: srun for container jobs: %w", err)
		}
		log.Info("the built-in agents' container jobs run with "+f.containerRuntime, "version", v)
	}
	// The watchdog stops the built-in agents' jobs, every process of
	// their groups, if this server dies (SIGKILL): the first process of a
	// job dies with it, its children would live on beside the job's next
	// run after a restart (core/agent/watchdog.go).
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("serve: find this program for the built-in agents' job watchdog: %w", err)
	}
	watchdog, err := agent.StartWatchdog(exe, log.With("process", "agent-watchdog"))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	work.setWatchdog(watchdog)
	for i := range cluster.Nodes {
		name := fmt.Sprintf("node-%d", i)
		a, err := agent.New(agent.Config{
			Name:    name,
			Backend: gpu.NewSim(name, cluster.GPUs, cluster.MemGB*1024),
			WorkDir: filepath.Join(f.data, "agents", name),
			Grace:   f.grace,
			// Simulated jobs hand their GPUs over as real ones do.
			SimCheckpoint: f.simCheckpoint,
			CPUs:          8 * cluster.GPUs, MemMiB: int64(cluster.GPUs) * 128 * 1024,
			Logger: log.With("node", name),
			Gate:   f.gate.Config(filepath.Join(f.data, "agents", name), log.With("node", name)),
			RunAs:  f.runAs,
			Owners: owners, OwnersGroups: ownersGroups,
			PassEnv:    f.passEnv,
			Containers: containers,
			Watchdog:   watchdog,
			// Each user's own folder, shared by the machines as a
			// cluster's scratch file system is (docs/files.md).
			DataPaths:     []jobfiles.Root{{Name: devDataPathName, Dir: filepath.Join(devUserData(f.data), agent.UserToken)}},
			MakeDataPaths: true,
		}, eng.Exits())
		if err != nil {
			return err
		}
		if _, err := a.StopStrayContainers(ctx); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		work.addAgent(a)
		if err := eng.AddNode(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

// devDataPathName names the built-in agents' data path: each user's
// folder DATA/userdata/USER, USER their Unix name (or their name).
const devDataPathName = "data"

// devUserData is the folder of the built-in agents' users' data paths.
func devUserData(data string) string { return filepath.Join(data, "userdata") }

// historyWindow is how much per-second GPU history the server keeps in memory.
const historyWindow = 10 * time.Minute

// parseCIDRs reads --trusted-proxies.
func parseCIDRs(list string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		_, n, err := net.ParseCIDR(part)
		if err != nil {
			return nil, fmt.Errorf("--trusted-proxies: %q is not a CIDR such as 10.0.0.0/8: %w", part, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// engineHalfLife maps --half-life onto engine.Config.HalfLife: 0 means no
// decay there, where the engine reads zero as its default.
func engineHalfLife(h time.Duration) time.Duration {
	if h == 0 {
		return -1
	}
	return h
}

// heldGPUs tells the GPU readings which jobs the scheduler placed on each
// GPU, from the running jobs' placements in the store: what the cluster
// page and /metrics count as busy, so the live charts and the GPU history
// count the same.
func heldGPUs(store *models.Store) telemetry.Holders {
	return func(ctx context.Context) (map[gpu.Ref][]int64, error) {
		placed, err := store.RunningPlacements(ctx)
		if err != nil {
			return nil, err
		}
		out := make(map[gpu.Ref][]int64)
		for _, id := range slices.Sorted(maps.Keys(placed)) {
			for _, p := range placed[id] {
				if k, ok := gpu.ParseRef(p); ok {
					out[k] = append(out[k], id)
				}
			}
		}
		return out, nil
	}
}
