// Package simcmd is `gpuportal sim`, the trace simulator's command: its
// flags, their checks and the replay they ask for (core/sim). It links
// the simulator and no store, server or cluster back end, so that
// cmd/gpuportal-sim, a binary of this command alone, starts in about
// twice an empty Go program's time, not ten; the full binary adds
// --from-db through FromDB (docs/simulator.md, "Fourth round").
package simcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpuportal/gpuportal/core/forecast"
	"github.com/gpuportal/gpuportal/core/forecast/replay"
	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/salussim"
	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/sim"
	"github.com/gpuportal/gpuportal/core/trace"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// FromDB replays the cluster's own history, `sim --from-db`: the jobs
// that q's database holds, under each of policies with cfg (whose Nodes
// and Teams, when empty, come from the database too), printed as out
// asks. It is the full binary's (package cli), which links the store;
// a command built without one refuses --from-db.
type FromDB func(ctx context.Context, q DBQuery, cfg sim.Config, policies []string, out Output, stdout, stderr io.Writer) error

// DBQuery is what --from-db reads, from the flags of the same names.
type DBQuery struct {
	// Data is the data folder of the SQLite database, as serve's; DB, when
	// set, the database instead ("sqlite:PATH" or a "postgres://" URL).
	Data, DB string
	// Days: the jobs finished in the last Days days.
	Days int
	// Export, when set, is a file to write the jobs to as a native trace.
	Export string
	// MaxJobs, when positive, keeps the MaxJobs most recent jobs only.
	MaxJobs int
}

// Output is how sim prints its results: JSON instead of a table, and a
// CDF plot to the file Plot names, if any.
type Output struct {
	JSON bool
	Plot string
}

// Command is `gpuportal sim`: it replays a trace under each listed policy
// and prints one row per policy (a JSON array with --json). fromDB runs
// --from-db; nil refuses it.
func Command(stdout, stderr io.Writer, fromDB FromDB) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sim --trace FILE --cluster NODESxGPUS|FILE [--policy fifo,tiresias-l,...] [--teams vision:16:1,nlp:8:1] [--json] [--plot out.svg] [knobs]",
		Short: "replay a cluster trace under several policies and compare them",
	}
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	var o simFlags
	o.register(fs)
	cmd.Flags().AddGoFlagSet(fs)
	formats := []string{"tiresias", "openb", "native"}
	for i, f := range formats {
		formats[i] = cobra.CompletionWithDesc(f, "trace format")
	}
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
	cmd.AddCommand(matrixCommand(stdout, stderr))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		if len(args) > 0 {
			return fmt.Errorf("sim: unexpected argument %q (flags only; see --help)", args[0])
		}
		set := map[string]bool{}
		cmd.Flags().Visit(func(fl *pflag.Flag) { set[fl.Name] = true })
		if err := o.fromDB.check(set); err != nil {
			return err
		}
		if o.fromDB.on && fromDB == nil {
			return errors.New("sim: --from-db: this binary has no database drivers; run gpuportal sim --from-db")
		}
		if o.tracePath == "" && !o.fromDB.on {
			return errors.New("sim: --trace is required (or --from-db)")
		}
		if o.cluster == "" && !o.fromDB.on {
			return errors.New("sim: --cluster is required (for example --cluster 4x8)")
		}
		if o.forecastN < 1 {
			return fmt.Errorf("sim: --forecast-every %d: want 1 or more", o.forecastN)
		}
		if o.forecastOrc != "" && !o.forecastOn {
			return errors.New("sim: --forecast-oracle: only with --forecast")
		}
		if _, _, err := forecastOracle(o.forecastOrc); err != nil {
			return err
		}
		if set["forecast-max-load"] && !o.forecastOn {
			return errors.New("sim: --forecast-max-load: only with --forecast")
		}
		if err := forecast.CheckMaxLoad(o.forecastMax); err != nil {
			return fmt.Errorf("sim: --forecast-max-load: %w", err)
		}
		cfg, names, f, err := o.config()
		if err != nil {
			return err
		}
		defer simGCTarget()()
		if o.cpuProfile != "" {
			stop, err := startCPUProfile(o.cpuProfile)
			if err != nil {
				return fmt.Errorf("sim: --cpuprofile: %w", err)
			}
			defer func() {
				if err := stop(); err != nil {
					fmt.Fprintf(stderr, "sim: --cpuprofile: %v\n", err)
				}
			}()
		}
		if o.fromDB.on {
			return fromDB(ctx, o.fromDB.DBQuery, cfg, names, Output{JSON: o.asJSON, Plot: o.plot}, stdout, stderr)
		}
		return o.run(ctx, cfg, names, f, stdout, stderr)
	}
	return cmd
}

// run replays the trace under each of names and prints the comparison
// (or the forecasts' calibration).
func (o *simFlags) run(ctx context.Context, cfg sim.Config, names []string, f trace.Format, stdout, stderr io.Writer) error {
	tr, err := trace.ReadFile(o.tracePath, f)
	if err != nil {
		return fmt.Errorf("sim: --trace: %w", err)
	}
	for reason, n := range tr.Skipped {
		fmt.Fprintf(stderr, "sim: %s: skipped %d rows (%s)\n", tr.Name, n, reason)
	}
	if o.jitterSeed != 0 {
		tr.Jobs = trace.Jittered(tr.Jobs, o.jitterSeed, simJitterShiftS, simJitterScale)
	}
	if o.assign != "" {
		if _, err := trace.AssignTeams(tr.Jobs, o.assign); err != nil {
			return fmt.Errorf("sim: --assign-teams: %w", err)
		}
	}
	if o.forecastOn {
		rc := replay.Config{Every: o.forecastN, NoArrivals: !o.forecastArr}
		rc.Forecast.KnownRunTimes, rc.KnownArrivals, _ = forecastOracle(o.forecastOrc)
		rc.Forecast.MaxLoad = o.forecastMax
		return simForecast(ctx, stdout, tr.Jobs, cfg, names, rc, o.asJSON)
	}
	results, err := sim.Compare(ctx, tr.Jobs, cfg, names)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	for _, r := range results {
		if r.Finished < r.Jobs {
			fmt.Fprintf(stderr, "sim: %s finished %d of %d jobs: the scheduler left the rest waiting on an idle cluster\n", r.Policy, r.Finished, r.Jobs)
		}
	}
	if o.plot != "" {
		if err := WritePlot(o.plot, results, fmt.Sprintf("JCT CDF: %s on %s", filepath.Base(tr.Name), simClusterLabel(o.cluster, cfg.Nodes))); err != nil {
			return fmt.Errorf("sim: --plot: %w", err)
		}
	}
	if o.asJSON {
		return sim.WriteJSON(stdout, results)
	}
	return sim.WriteTable(stdout, results)
}

// config checks the flags (but for the trace and the database's) and
// returns the simulator's configuration, the policies to compare and the
// trace's format.
func (o *simFlags) config() (sim.Config, []string, trace.Format, error) {
	f, err := trace.ParseFormat(o.format)
	if err != nil {
		return sim.Config{}, nil, "", fmt.Errorf("sim: --format: %w", err)
	}
	names, err := sim.ParseCandidates(o.policies)
	if err != nil {
		return sim.Config{}, nil, "", fmt.Errorf("sim: --policy: %w", err)
	}
	for _, n := range names {
		if _, rule := sim.SplitCandidate(n); o.reference && rule != "" && rule != sched.RuleReference {
			return sim.Config{}, nil, "", fmt.Errorf("sim: --reference asks for the reference rule, --policy %s for another", n)
		}
	}
	thr, err := simParseThresholds(o.thresholds, o.queues)
	if err != nil {
		return sim.Config{}, nil, "", fmt.Errorf("sim: %w", err)
	}
	if err := o.checkKnobs(); err != nil {
		return sim.Config{}, nil, "", err
	}
	shareMode, err := salussim.ParseSharing(o.sharing)
	if err != nil {
		return sim.Config{}, nil, "", fmt.Errorf("sim: --sharing: %w", err)
	}
	if shareMode == salussim.SharingSalus && o.placement == sched.PlaceCount {
		return sim.Config{}, nil, "", errors.New("sim: --sharing salus needs --placement nodes: count placement names no GPU to share")
	}
	lanePol, err := lanes.ParsePolicy(o.lanePolicy)
	if err != nil {
		return sim.Config{}, nil, "", fmt.Errorf("sim: --lane-policy: %w", err)
	}
	half, err := trace.ParseDuration(o.halfLife)
	if err != nil {
		return sim.Config{}, nil, "", fmt.Errorf("sim: --half-life: %w", err)
	}
	if half == 0 {
		half = -1 // no decay
	}
	minRun := o.minRuntime
	if minRun == 0 {
		minRun = sched.NoMinRuntime
	}
	teamList, nodes, err := o.teamsAndNodes()
	if err != nil {
		return sim.Config{}, nil, "", err
	}
	cfg := sim.Config{
		Sched: sched.Config{
			Thresholds:  thr,
			PromoteKnob: o.promoteKnob,
			Reference:   o.reference,
			Placement:   o.placement,
			// Read by srtf and srsf.
			LimitsAsHints: o.limitHints,
			MinRuntimeS:   minRun,
			OmitWaits:     true,
			CPUAlloc:      o.cpuAlloc,
			// Read only with --sharing salus.
			SharePlacement:  o.sharePlace,
			ReserveAfterS:   o.reserveS,
			ReserveLeadS:    o.reserveLead,
			MaxReservations: o.maxReserve,
		},
		Nodes:        nodes,
		PreemptCostS: o.preemptCost,
		HandoverS:    o.handover,
		PassEveryS:   o.passEvery,
		Teams:        teamList,
		NoFairShare:  !o.fairShare,
		HalfLifeS:    half,
		Sharing:      shareMode,
		LanePolicy:   lanePol,
		LimitFactor:  o.limitFactor,
		LimitSpread:  o.limitSpread,
		LearnPrior:   o.learnPrior,
	}
	return cfg, names, f, nil
}

// teamsAndNodes reads --teams and --cluster; nil for those not given.
func (o *simFlags) teamsAndNodes() (teams []trace.Team, nodes []trace.Node, err error) {
	if o.teams != "" {
		if teams, err = trace.LoadTeams(o.teams); err != nil {
			return nil, nil, fmt.Errorf("sim: --teams: %w", err)
		}
	}
	if o.cluster != "" {
		if nodes, err = trace.LoadCluster(o.cluster); err != nil {
			return nil, nil, fmt.Errorf("sim: --cluster: %w", err)
		}
	}
	return teams, nodes, nil
}

// checkKnobs checks the scheduler's and the simulation's numbers and
// modes, each against the others it needs.
func (o *simFlags) checkKnobs() error {
	if !(o.preemptCost >= 0) || math.IsInf(o.preemptCost, 1) {
		return fmt.Errorf("sim: --preempt-cost-s %v: want seconds, 0 or more", o.preemptCost)
	}
	if f := o.limitFactor; f != 0 && !(f >= 1 && !math.IsInf(f, 1)) {
		return fmt.Errorf("sim: --limit-factor %v: want 1 or more (a limit below the duration would stop the job), or 0 for none", f)
	}
	if !(o.handover >= 0) || math.IsInf(o.handover, 1) {
		return fmt.Errorf("sim: --handover-s %v: want seconds, 0 or more", o.handover)
	}
	if !(o.passEvery >= 0) || math.IsInf(o.passEvery, 1) {
		return fmt.Errorf("sim: --pass-every-s %v: want seconds, 0 (only at events) or more", o.passEvery)
	}
	if !(o.reserveS >= 0) || math.IsInf(o.reserveS, 1) {
		return fmt.Errorf("sim: --reserve-after-s %v: want seconds, 0 (off) or more", o.reserveS)
	}
	if o.reserveLead != sched.LeadHalfBound && (!(o.reserveLead >= 0) || math.IsInf(o.reserveLead, 1)) {
		return fmt.Errorf("sim: --reserve-lead-s %v: want seconds, 0 (off) or more, or -1 (half the bound)", o.reserveLead)
	}
	if o.maxReserve < 0 {
		return fmt.Errorf("sim: --max-reservations %d: want 1 or more, or 0 for the default", o.maxReserve)
	}
	if !(o.promoteKnob >= 0) || math.IsInf(o.promoteKnob, 1) {
		return fmt.Errorf("sim: --promote-knob %v: want 0 (off) or a positive factor", o.promoteKnob)
	}
	if o.placement != sched.PlaceNodes && o.placement != sched.PlaceCount {
		return fmt.Errorf("sim: --placement %q: want %s or %s", o.placement, sched.PlaceNodes, sched.PlaceCount)
	}
	if o.cpuAlloc != "" && !slices.Contains(sched.CPUAllocModes(), o.cpuAlloc) {
		return fmt.Errorf("sim: --cpu-alloc %q: want %s", o.cpuAlloc, strings.Join(sched.CPUAllocModes(), " or "))
	}
	if o.cpuAlloc != "" && o.placement == sched.PlaceCount {
		return errors.New("sim: --cpu-alloc needs --placement nodes: count placement puts jobs on no node")
	}
	if !slices.Contains(sched.SharePlacements(), o.sharePlace) {
		return fmt.Errorf("sim: --share-placement %q: want %s", o.sharePlace, strings.Join(sched.SharePlacements(), " or "))
	}
	if !(o.minRuntime >= 0) || math.IsInf(o.minRuntime, 1) {
		return fmt.Errorf("sim: --min-runtime-s %v: want seconds, 0 or more", o.minRuntime)
	}
	return nil
}

// simFlags are the flags of `gpuportal sim`.
type simFlags struct {
	tracePath   string
	format      string
	cluster     string
	policies    string
	asJSON      bool
	plot        string
	queues      int
	thresholds  string
	reference   bool
	promoteKnob float64
	preemptCost float64
	handover    float64
	passEvery   float64
	placement   string
	teams       string
	fairShare   bool
	halfLife    string
	minRuntime  float64
	cpuAlloc    string
	sharing     string
	lanePolicy  string
	sharePlace  string
	assign      string
	forecastOn  bool
	forecastN   int
	forecastArr bool
	forecastOrc string
	forecastMax float64
	limitHints  bool
	limitFactor float64
	limitSpread bool
	reserveS    float64
	reserveLead float64
	maxReserve  int
	jitterSeed  uint64
	cpuProfile  string
	learnPrior  bool
	fromDB      dbFlags
}

// register defines the flags on fs.
func (o *simFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.tracePath, "trace", "", "job trace `file` (required)")
	fs.StringVar(&o.format, "format", "", "trace format: tiresias, openb or native (default: detected from the header)")
	fs.StringVar(&o.cluster, "cluster", "", "cluster: NODESxGPUS[xGPU_MEM_GB] such as 4x8, or a node `file` such as openb-gpu-nodes.csv (required)")
	fs.StringVar(&o.policies, "policy", strings.Join(sched.Policies(), ","), "comma-separated `policies` to compare; policy:rule picks one of a policy's rules (tiresias-l: preempted-first, queue-entry, least-service, reference; tiresias-g: full-index, one-quantum, least-service, reference, full-body, levels, levels-table)")
	fs.BoolVar(&o.asJSON, "json", false, "print a JSON array, one object per policy, instead of a table")
	fs.StringVar(&o.plot, "plot", "", "write a CDF of JCT for all policies to this SVG `file`")
	fs.IntVar(&o.queues, "queues", 0, "number of priority queues of dlas, tiresias-l and tiresias-g (default: one more than the thresholds)")
	fs.StringVar(&o.thresholds, "thresholds", "", "comma-separated queue `limits`, GPU-seconds (seconds for dlas) (default 3250,7200)")
	fs.BoolVar(&o.reference, "reference", false, "tiresias-l and tiresias-g follow the rules traced to the Tiresias simulator's figures (queue-entry order, the one-quantum Gittins index) instead of the core's own (preempted-first, the full index); see docs/scheduling.md")
	fs.Float64Var(&o.promoteKnob, "promote-knob", 0, "starvation promotion: a job waiting longer than `K` x its run time returns to queue 0; 0 is off")
	fs.Float64Var(&o.preemptCost, "preempt-cost-s", 0, "`seconds` a preempted job loses to checkpoint and restore each time it resumes")
	fs.Float64Var(&o.passEvery, "pass-every-s", 0, "pass at least every this many `seconds` while jobs wait, as serve's engine does every second; 0: only at arrivals, completions and the scheduler's rechecks, as the Tiresias simulator (what differs is what changes with time alone, such as fair share's decayed usage)")
	fs.Float64Var(&o.handover, "handover-s", 0, "`seconds` a preempted job keeps its GPUs (checkpoint and exit) before the next job may start on them, as live")
	fs.StringVar(&o.placement, "placement", sched.PlaceNodes, "placement: nodes (real nodes) or count (count GPUs only, as the Tiresias simulator's count scheme)")
	fs.StringVar(&o.teams, "teams", "", "teams for fair share, `NAME:GPUS[:WEIGHT[:CAP]],...` (guaranteed GPUs, weight, GPUs per user) or a team file; jobs name their team in the trace")
	fs.BoolVar(&o.fairShare, "fair-share", true, "with --teams: apply fair share (false: schedule without it, still reporting per team)")
	fs.StringVar(&o.halfLife, "half-life", "7d", "half-life of team usage for the fair-share factor, such as 7d, 168h or 3600 (seconds); 0 for no decay")
	fs.Float64Var(&o.minRuntime, "min-runtime-s", sched.DefaultMinRuntimeS, "`seconds` a borrowed job runs before it may be reclaimed; 0 for none")
	fs.StringVar(&o.cpuAlloc, "cpu-alloc", "", "model CPUs and host memory: proportional (by GPUs) or synergy (by each job's sensitivity); jobs then run at their profile's speed (default: not modelled)")
	fs.StringVar(&o.sharing, "sharing", "none", "GPU sharing: none (every job takes whole GPUs) or salus (fractional jobs, gpu_milli < 1000, share GPUs where the safety condition holds; needs --placement nodes)")
	fs.StringVar(&o.lanePolicy, "lane-policy", string(lanes.Fair), "with --sharing salus: which job of a shared lane runs, pack (arrival order), fair (least GPU time so far) or srtf (least work left), as the agent's --lane-policy")
	fs.StringVar(&o.sharePlace, "share-placement", sched.ShareFreeFirst, "with --sharing salus: where a sharing job goes, free-first (a free GPU while one is free; a shared GPU only when none is, or when whole-GPU jobs wait for the free ones) or fullest-first (the shared GPU it leaves fullest whenever one has room)")
	fs.StringVar(&o.assign, "assign-teams", "", "give jobs without a team one of these, `NAME:SHARE,...` (such as vision:60,nlp:40), split by a hash of the job ID")
	fs.BoolVar(&o.forecastOn, "forecast", false, "measure start-time forecasts: at each arrival, forecast the job's start as the live portal does (from the jobs finished so far) and compare with the simulated start; prints the calibration per policy")
	fs.IntVar(&o.forecastN, "forecast-every", 1, "with --forecast: forecast one wait in `N` (a cheaper measurement of a long trace)")
	fs.StringVar(&o.forecastOrc, "forecast-oracle", "", "with --forecast, a diagnostic: runtimes (forecasts know each job's run time), arrivals (they know the next 200 submissions within a day), or runtimes,arrivals; what error is left is the rest's")
	fs.Float64Var(&o.forecastMax, "forecast-max-load", forecast.DefaultMaxLoad, "with --forecast: the expected arrivals bring at most this share of the cluster's GPUs in work (GPUs times the mean run time), as serve --forecast-max-load; a number above 0")
	fs.BoolVar(&o.forecastArr, "forecast-arrivals", true, "with --forecast: forecasts expect arrivals like the last 100, at their rate, as the live portal does (false: only the jobs already submitted)")
	fs.BoolVar(&o.limitHints, "limits-as-hints", false, "srtf and srsf rank a job of unknown duration by its declared time limit less the time it has run, an upper bound on its work left (see --limit-factor)")
	fs.Float64Var(&o.limitFactor, "limit-factor", 0, "hide the jobs' durations from the scheduler and give each a time limit of its duration x `F` (1 or more), as users overestimate; 0: durations known, no limits")
	fs.BoolVar(&o.limitSpread, "limit-spread", false, "with --limit-factor F: each job's factor is drawn from 1 to F, log-uniformly by a hash of its ID, instead of F for all")
	fs.Float64Var(&o.reserveS, "reserve-after-s", 0, "reserve GPUs for a job that has waited `seconds` (its age less its run time) and cannot start: the GPUs that free earliest, which later jobs use only if they end before then or, under a preemptive policy, give them back as backfills; past twice the bound (with --reserve-lead-s: the bound) any batch job there, sharing ones too, even another team's guaranteed jobs started there after it was due, never sessions (docs/scheduling.md, Reservations and Reservations under fair share); 0 is off (serve's default is 300)")
	fs.Float64Var(&o.reserveLead, "reserve-lead-s", 0, "with --reserve-after-s: reserve a job this many `seconds` before its bound, so that its GPUs drain toward it, the bound then being when it must start (it takes its GPUs from any batch job, sharing ones too, at the bound); -1: half the bound (serve's default); 0: reserved at the bound, its GPUs taken at twice it")
	fs.IntVar(&o.maxReserve, "max-reservations", 0, "with --reserve-after-s: how many jobs hold a reservation at once, in priority order (default 1)")
	fs.Uint64Var(&o.jitterSeed, "jitter-seed", 0, "replay a jittered copy of the trace, drawn from seed `N` (trace.Jittered: submit times moved by up to 60 s either way, durations and time limits scaled by 1/1.25 to 1.25); 0 replays the trace as it is")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this `file`, for go tool pprof")
	fs.BoolVar(&o.learnPrior, "learn-prior", false, "tiresias-g's distribution of GPU-times learns online, as the live server's does: each finished job joins it, from the shipped prior, with the jobs still running as lower bounds (without: the prior throughout, as in the reference)")
	o.fromDB.register(fs)
}

// The jitter of --jitter-seed, as the jittered copies of docs/scheduling.md.
const (
	simJitterShiftS = 60
	simJitterScale  = 1.25
)

// forecastOracle reads --forecast-oracle: what the forecasts are told,
// runtimes, arrivals, or both, comma-separated; "" for neither.
func forecastOracle(v string) (runTimes, arrivals bool, err error) {
	if v == "" {
		return false, false, nil
	}
	for _, w := range strings.Split(v, ",") {
		switch strings.TrimSpace(w) {
		case "runtimes":
			runTimes = true
		case "arrivals":
			arrivals = true
		default:
			return false, false, fmt.Errorf("sim: --forecast-oracle %q: want runtimes, arrivals or both, comma-separated", v)
		}
	}
	return runTimes, arrivals, nil
}

// simForecast replays jobs under each policy, forecasting starts at each
// arrival, and prints how the forecasts did (core/forecast/replay).
func simForecast(ctx context.Context, stdout io.Writer, jobs []trace.Job, cfg sim.Config, policies []string, rc replay.Config, asJSON bool) error {
	var reports []*replay.Report
	for _, p := range policies {
		rc.Sim = cfg
		rc.Sim.Sched.Policy, rc.Sim.Sched.Rule = sim.SplitCandidate(p)
		r, err := replay.Run(ctx, jobs, rc)
		if err != nil {
			return fmt.Errorf("sim: --forecast: %w", err)
		}
		reports = append(reports, r)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reports)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\twaits\tstarted at once\tforecast\twaits of\tcompared\twithin range\tmedian |err| s\tmedian |err|/wait\tp90 |err| s\tmean err s\tmedian lead s\tnever, started\tunknown\tlater\tforecast passes\t")
	for _, r := range reports {
		for _, part := range []struct {
			name string
			c    forecast.Calibration
		}{{"all", r.Calibration}, {"arrivals", r.Arrivals}, {"resumes", r.Resumes},
			{"< " + strconv.Itoa(replay.ShortWaitS) + " s", r.Short}, {">= " + strconv.Itoa(replay.ShortWaitS) + " s", r.Long}} {
			c := part.c
			if part.name != "all" && c.Forecasts == 0 {
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%.1f%%\t%.0f\t%.2f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t\n", r.Policy, r.Waits, r.StartedAtOnce,
				r.Forecast, part.name, c.Forecasts, 100*c.WithinShare, c.MedianAbsErrorS, c.MedianRelError, c.P90AbsErrorS, c.MeanErrorS, c.MedianLeadS,
				c.NeverStarted, r.States[forecast.StateUnknown], r.States[forecast.StateLater], r.Passes)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("sim: write table: %w", err)
	}
	return nil
}

// simParseThresholds reads --thresholds and checks it against --queues. With
// --queues alone, the first queues-1 default thresholds are used.
func simParseThresholds(s string, queues int) ([]float64, error) {
	if queues < 0 {
		return nil, fmt.Errorf("--queues %d: want 1 or more queues", queues)
	}
	out, err := sim.ParseThresholds(s)
	if err != nil {
		return nil, fmt.Errorf("--thresholds: %w", err)
	}
	switch {
	case queues == 0:
		return out, nil
	case s == "":
		if queues-1 > len(sched.DefaultThresholds) {
			return nil, fmt.Errorf("--queues %d needs --thresholds with %d limits (there are %d defaults)",
				queues, queues-1, len(sched.DefaultThresholds))
		}
		return append([]float64{}, sched.DefaultThresholds[:queues-1]...), nil
	case queues != len(out)+1:
		return nil, fmt.Errorf("--queues %d needs %d thresholds; --thresholds has %d", queues, queues-1, len(out))
	}
	return out, nil
}

// WritePlot writes a CDF of the results' JCTs, titled title, to a new
// SVG file at path.
func WritePlot(path string, results []*sim.Result, title string) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return sim.WriteCDF(f, results, title)
}

// simClusterLabel names the cluster for the plot's title.
func simClusterLabel(arg string, nodes []trace.Node) string {
	gpus := 0
	for _, n := range nodes {
		gpus += n.GPUs
	}
	return fmt.Sprintf("%s (%d nodes, %d GPUs)", filepath.Base(arg), len(nodes), gpus)
}

// simGCPercent is the garbage collector's target while sim runs, unless
// GOGC is set: the heap may grow to nine times what is live before a
// collection. A replay keeps little (the trace, the results) and makes
// short-lived garbage fast; at the default of 100 the collector runs
// three times in a 4,000-job replay and about ten in a 100,000-job one,
// most of it marking the same trace again (docs/simulator.md, "Speed").
const simGCPercent = 800

// simGCTarget sets the collector's target for a simulation and returns
// what puts the previous one back.
func simGCTarget() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(simGCPercent)
	return func() { debug.SetGCPercent(old) }
}

// startCPUProfile profiles the process's CPU into a new file at path
// until the returned stop is called.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
