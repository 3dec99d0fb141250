package cli

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/jobfiles"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// agentTokenEnv holds the agent token when --token is not given: unlike a
// command line, the environment is not visible to other users.
const agentTokenEnv = "GPUPORTAL_AGENT_TOKEN"

type agentFlags struct {
	server, token, gpus string
	name, workDir       string
	runAs               string
	allowRootOwner      bool
	minUID              int
	jobDirMode          os.FileMode
	caFile              string
	grace               time.Duration
	simCheckpoint       time.Duration
	logLevel            slog.Level
	gate                agent.GateFlags
	monitorOnly         bool
	check               bool
	cgroups             bool
	simFaults           []gpu.SimFault
	passEnv             []string
	containerRuntime    string // podman or docker; "": no container jobs
	containerNetwork    agent.ContainerNetwork
	containerSrun       string // a static srun for container jobs; "": found (agent.FindContainerSrun)
	advertiseAddr       string
	dataPaths           []jobfiles.Root // besides each job's folder (docs/files.md)
	fileLimits          jobfiles.Limits
}

// agentCommand is "gpuportal agent": it runs jobs on this machine (or on
// simulated machines) for a server.
func agentCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "agent [flags]", Short: "run jobs on this machine for a remote server"}
	version := versionFlag(cmd, stdout)
	var f agentFlags
	check := f.register(cmd.Flags())
	completeValues(cmd, "log-level", []string{"debug", "info", "warn", "error"}, "log level")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if version() {
			return nil
		}
		if len(args) > 0 {
			return fmt.Errorf("agent: unexpected argument %q", args[0])
		}
		if err := check(); err != nil {
			return err
		}
		return runAgent(cmd.Context(), f, stdout, stderr)
	}
	return cmd
}

// parseAgentFlags reads the agent's flags from args as agent does.
func parseAgentFlags(args []string, stderr io.Writer) (agentFlags, error) {
	var f agentFlags
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	check := f.register(fs)
	if err := fs.Parse(args); err != nil {
		return f, fmt.Errorf("agent: %w", err)
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("agent: unexpected argument %q", fs.Arg(0))
	}
	return f, check()
}

// register defines the agent's flags on pfs, their values read into f;
// check, once they are parsed, completes f from them and checks it.
func (f *agentFlags) register(pfs *pflag.FlagSet) (check func() error) {
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.StringVar(&f.server, "server", "", "the server's URL, such as https://gpus.example.com (required; default: $"+jobServerEnv+"); the URLs of several replicas, comma-separated, to connect to whichever leads")
	fs.StringVar(&f.token, "token", "", "the server's agent token (serve --agent-token); default: $"+agentTokenEnv+", which other users cannot see")
	fs.StringVar(&f.gpus, "gpus", "nvml", "GPUs: nvml (this machine's NVIDIA GPUs) or sim:NODESxGPUSxGB (simulated machines)")
	fs.StringVar(&f.name, "name", host, "this machine's name; simulated machines are NAME-0, NAME-1, ... when there are several")
	fs.StringVar(&f.workDir, "work-dir", "gpuportal-agent", "folder for jobs' work folders, output and checkpoints")
	fs.StringVar(&f.runAs, "run-as", "", "who jobs run as: owner (each job as its owner's Unix account on this machine; recommended when the agent runs as root), or one USER for every job (default: this agent's user, but never root unless --run-as root)")
	fs.BoolVar(&f.allowRootOwner, "allow-root-owner", false, "with --run-as owner: run the jobs of an owner whose Unix account is root as root (refused otherwise)")
	fs.IntVar(&f.minUID, "min-uid", agent.DefaultMinUID, "with --run-as owner: the lowest user ID a job runs as (root aside); the system's accounts below it never run jobs")
	jobDirMode := fs.String("job-dir-mode", "0700", "mode of each job's folder and checkpoint folder, which belong to the job's account: 0700, or a group mode such as 0750 or 2770 to share them with the account's group; others never get access")
	fs.StringVar(&f.caFile, "ca", "", "PEM file of certificate authorities to trust for an https server, besides the system's")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "time a stopped job gets between SIGTERM and SIGKILL")
	fs.DurationVar(&f.simCheckpoint, "sim-checkpoint", 0, "with --gpus sim:...: how long a simulated job, once asked to stop, takes to save a checkpoint and exit, holding its GPUs meanwhile (killed at --grace); 0: at once")
	fs.TextVar(&f.logLevel, "log-level", slog.LevelInfo, "the `level` of what is logged: debug, info, warn or error")
	f.gate.Register(fs)
	fs.BoolVar(&f.cgroups, "cgroups", true, "enforce jobs' CPU and memory allocations with cgroups where they are writable, and profile jobs' CPU sensitivity (docs/synergy.md)")
	fs.BoolVar(&f.monitorOnly, "monitor-only", false, "only watch this machine's GPUs and stream their samples, starting no jobs: for Slurm nodes under serve --executor slurm (docs/slurm.md)")
	fs.StringVar(&f.containerRuntime, "container-runtime", "", "run jobs that name a container image with this runtime: podman (the reference) or docker, or a path to one; empty: such jobs are refused (docs/agents.md, Container jobs)")
	fs.StringVar(&f.containerSrun, "container-srun", "", "a statically linked srun (CGO_ENABLED=0 go build ./cmd/gpuportal-srun) to mount into container jobs at "+agent.ContainerSrunPath+"; default: "+agent.SrunBinary+" beside this binary, or this binary if it is static (docs/slurm.md, srun inside a job)")
	fs.Var(&f.containerNetwork, "container-network", "the network of container jobs: private (each its own; a session's port is published on this machine's loopback only) or host (this machine's, as a command job's); docs/agents.md, Container jobs")
	fs.BoolVar(&f.check, "check", false, "only check that a server at --server answers GET /readyz, and exit: 0 when one does, 1 when none does (the agent image's HEALTHCHECK); needs no token")
	passEnv := fs.String("pass-env", "", "variables of this agent's environment that jobs get besides the minimal one (PATH, HOME, USER, LANG, LC_*, TZ, ...), comma-separated, such as LD_LIBRARY_PATH,NCCL_SOCKET_IFNAME; nothing else of the agent's environment reaches a job")
	fs.StringVar(&f.advertiseAddr, "advertise-addr", "", "the address other machines reach this one at, given to jobs on several machines as MASTER_ADDR and in their hostfile (docs/multinode.md); default: the address this agent connects to the server from")
	fs.Func("data-path", "a folder besides each job's own whose files the job's owner may browse, download and upload in the portal, as NAME=/DIR; {user} in DIR stands for the owner's Unix account (scratch=/scratch/{user}); repeatable. Access is as the job's account, which the kernel checks (docs/files.md)", func(v string) error {
		r, err := agent.ParseDataPath(v)
		if err != nil {
			return err
		}
		f.dataPaths = append(f.dataPaths, r)
		return nil
	})
	maxUpload := fs.String("max-upload", "1GiB", "the largest file the portal may upload into a job's folder or a data path (bytes, or with KiB, MiB, GiB)")
	maxArchive := fs.String("max-archive", "4GiB", "the most bytes of files a folder downloaded as a .tar.gz archive may hold (bytes, or with KiB, MiB, GiB)")
	simFaults := fs.String("sim-fault", "", "with --gpus sim:...: GPU failures to inject, GPU:xidN[@AFTER] or GPU:ecc[@AFTER], comma-separated (0:xid79@2s: GPU 0 reports XID 79 two seconds after a job first starts on it)")
	pfs.AddGoFlagSet(fs)
	return func() error {
		pass, err := agent.ParsePassEnv(*passEnv)
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		f.passEnv = pass
		if f.fileLimits.MaxUpload, err = jobfiles.ParseSize(*maxUpload); err != nil {
			return fmt.Errorf("agent: --max-upload %w", err)
		}
		if f.fileLimits.MaxArchive, err = jobfiles.ParseSize(*maxArchive); err != nil {
			return fmt.Errorf("agent: --max-archive %w", err)
		}
		if f.advertiseAddr != "" {
			if err := wire.CheckAddr(f.advertiseAddr); err != nil {
				return fmt.Errorf("agent: --advertise-addr %w", err)
			}
		}
		if f.jobDirMode, err = agent.ParseJobDirMode(*jobDirMode); err != nil {
			return fmt.Errorf("agent: --job-dir-mode %w", err)
		}
		if f.minUID < 1 {
			return fmt.Errorf("agent: --min-uid %d: want a user ID of 1 or more (root is allowed only by --allow-root-owner)", f.minUID)
		}
		if f.allowRootOwner && f.runAs != agent.RunAsOwner {
			return errors.New("agent: --allow-root-owner needs --run-as owner")
		}
		if f.containerNetwork == agent.NetworkHost && f.containerRuntime == "" {
			return errors.New("agent: --container-network host needs --container-runtime")
		}
		if f.containerSrun != "" && f.containerRuntime == "" {
			return errors.New("agent: --container-srun needs --container-runtime")
		}
		faults, err := gpu.ParseSimFaults(*simFaults)
		if err != nil {
			return fmt.Errorf("agent: --sim-fault: %w", err)
		}
		if len(faults) > 0 && !strings.HasPrefix(f.gpus, "sim:") {
			return errors.New("agent: --sim-fault needs simulated GPUs (--gpus sim:...)")
		}
		f.simFaults = faults
		if f.simCheckpoint < 0 {
			return fmt.Errorf("agent: --sim-checkpoint %v: must be 0 or more", f.simCheckpoint)
		}
		if f.simCheckpoint > 0 && !strings.HasPrefix(f.gpus, "sim:") {
			return errors.New("agent: --sim-checkpoint needs simulated GPUs (--gpus sim:...)")
		}
		if err := f.gate.Check("agent"); err != nil {
			return err
		}
		if f.server == "" {
			f.server = os.Getenv(jobServerEnv)
		}
		if f.server == "" {
			return fmt.Errorf("agent: --server is required (or $%s)", jobServerEnv)
		}
		if f.token == "" {
			f.token = os.Getenv(agentTokenEnv)
		}
		if f.token == "" && !f.check {
			return fmt.Errorf("agent: no token: set $%s or pass --token", agentTokenEnv)
		}
		if err := wire.CheckNodeName(f.name); err != nil {
			return fmt.Errorf("agent: --name: %w", err)
		}
		return nil
	}
}

// machine is one machine the agent runs: its GPUs and resources.
type machine struct {
	name    string
	backend gpu.Backend
	cpus    int
	memMiB  int64
	workDir string
}

// agentMachines reads --gpus: this machine's NVIDIA GPUs, or simulated
// machines. close releases the GPU back end.
func agentMachines(f agentFlags, log *slog.Logger) (ms []machine, close func() error, err error) {
	if f.gpus == "nvml" {
		b, closeNVML, err := openNVML(log)
		if err != nil {
			return nil, nil, err
		}
		mem, err := hostMemMiB()
		if err != nil {
			log.Warn("cannot read host memory", "err", err)
		}
		return []machine{{name: f.name, backend: b, cpus: runtime.NumCPU(), memMiB: mem, workDir: f.workDir}}, closeNVML, nil
	}
	spec, ok := strings.CutPrefix(f.gpus, "sim:")
	if !ok {
		return nil, nil, fmt.Errorf("--gpus %q: want nvml or sim:NODESxGPUSxGB, for example sim:1x4x80", f.gpus)
	}
	c, err := gpu.ParseSimCluster(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("--gpus %q: want sim:NODESxGPUSxGB, each a number from 1 to 4096, for example sim:1x4x80", f.gpus)
	}
	for i := range c.Nodes {
		m := machine{
			name: f.name, workDir: f.workDir,
			// As the server's built-in simulated machines.
			cpus: 8 * c.GPUs, memMiB: int64(c.GPUs) * 128 * 1024,
		}
		if c.Nodes > 1 {
			m.name = fmt.Sprintf("%s-%d", f.name, i)
			m.workDir = filepath.Join(f.workDir, m.name)
		}
		if err := wire.CheckNodeName(m.name); err != nil {
			return nil, nil, fmt.Errorf("--name: %w", err)
		}
		sim := gpu.NewSim(m.name, c.GPUs, c.MemGB*1024)
		for _, fault := range f.simFaults {
			if err := sim.InjectFault(fault, time.Now()); err != nil {
				return nil, nil, fmt.Errorf("--sim-fault: %w", err)
			}
		}
		m.backend = sim
		ms = append(ms, m)
	}
	return ms, func() error { return nil }, nil
}

// hostMemMiB reads the machine's memory from /proc/meminfo.
func hostMemMiB() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kib, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/meminfo: %w", err)
			}
			return kib / 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("/proc/meminfo: %w", err)
	}
	return 0, errors.New("/proc/meminfo: no MemTotal")
}

func agentTLS(caFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca %s: no PEM certificates in it", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// runAgent runs jobs on this machine (or on
// simulated machines) for the server at --server, until interrupted.
func runAgent(ctx context.Context, f agentFlags, stdout, stderr io.Writer) error {
	// Jobs must not inherit the token.
	_ = os.Unsetenv(agentTokenEnv)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: f.logLevel}))
	tlsCfg, err := agentTLS(f.caFile)
	if err != nil {
		return err
	}
	if f.check {
		return checkAgentServers(ctx, f.server, tlsCfg, stdout)
	}
	if f.runAs == "" && os.Geteuid() == 0 && !f.monitorOnly {
		log.Warn("the agent runs as root without --run-as: command jobs will be refused (pass --run-as owner to run each job as its owner's Unix account, --run-as USER for one account, or --run-as root)")
	}
	machines, closeGPUs, err := agentMachines(f, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := closeGPUs(); err != nil {
			log.Warn("close GPUs", "err", err)
		}
	}()

	// The watchdog stops the jobs if this process freezes or dies.
	var watchdog *agent.WatchdogLink
	if !f.monitorOnly {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this program for its job watchdog: %w", err)
		}
		if watchdog, err = agent.StartWatchdog(exe, log); err != nil {
			return err
		}
		defer func() {
			if err := watchdog.Close(); err != nil {
				log.Warn("job watchdog", "err", err)
			}
		}()
	}

	var containers *agent.ContainerConfig
	if f.containerRuntime != "" && !f.monitorOnly {
		v, err := agent.CheckContainerRuntime(ctx, f.containerRuntime)
		if err != nil {
			return fmt.Errorf("agent: --container-runtime %w", err)
		}
		containers = &agent.ContainerConfig{Runtime: f.containerRuntime, CDI: agent.HasNvidiaCDI(agent.CDISpecDirs), Network: f.containerNetwork}
		if containers.Srun, err = agent.ContainerSrun(f.containerSrun, log); err != nil {
			return fmt.Errorf("agent: --container-srun: %w", err)
		}
		if f.gpus == "nvml" && !containers.CDI {
			return fmt.Errorf("agent: --container-runtime %s: no CDI spec of this machine's GPUs in %s, so containers could not be given only their jobs' GPUs: generate it with the NVIDIA container toolkit (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml)",
				f.containerRuntime, strings.Join(agent.CDISpecDirs, " or "))
		}
		log.Info("container jobs run with "+f.containerRuntime, "version", v, "cdi", containers.CDI, "network", containers.Network.String())
	}

	exits := make(chan job.Exit, 64)
	var locals []*agent.Local
	gpus := 0
	for _, m := range machines {
		a, err := agent.New(agent.Config{
			Name: m.name, Backend: m.backend, WorkDir: m.workDir, Grace: f.grace, SimCheckpoint: f.simCheckpoint,
			CPUs: m.cpus, MemMiB: m.memMiB, Logger: log.With("node", m.name),
			RunAs: f.runAs, AllowRootOwner: f.allowRootOwner, MinUID: f.minUID, JobDirMode: f.jobDirMode, RefuseRoot: true, MonitorOnly: f.monitorOnly, Cgroups: f.cgroups && !f.monitorOnly,
			Gate:     f.gate.Config(m.workDir, log.With("node", m.name)),
			Watchdog: watchdog, PassEnv: f.passEnv, Containers: containers,
			DataPaths: f.dataPaths, FileLimits: f.fileLimits,
		}, exits)
		if err != nil {
			return err
		}
		if stray, err := a.StopStrayContainers(ctx); err != nil {
			return fmt.Errorf("agent %s: %w", m.name, err)
		} else if len(stray) > 0 {
			log.Warn("stopped containers an earlier agent process left", "node", m.name, "containers", stray)
		}
		locals = append(locals, a)
		gpus += len(a.Devices())
	}
	client, err := agent.NewClient(agent.ClientConfig{
		Server: f.server, Token: f.token, Nodes: locals, Exits: exits, TLS: tlsCfg, Logger: log,
		Watchdog: watchdog, AdvertiseAddr: f.advertiseAddr,
	})
	if err != nil {
		return err
	}
	mode := ""
	if f.monitorOnly {
		mode = " (monitor-only: no jobs)"
	}
	fmt.Fprintf(stdout, "gpuportal agent: %d machine(s), %d GPUs%s, connecting to %s\n", len(locals), gpus, mode, f.server)
	runErr := client.Run(ctx)

	// Disconnected: the server requeues this machine's jobs after its
	// heartbeat timeout. Stop them, and keep taking their exits.
	log.Info("agent stopping: stopping its jobs", "grace", f.grace)
	drained := make(chan struct{})
	defer close(drained)
	go func() {
		for {
			select {
			case <-exits:
			case <-drained:
				return
			}
		}
	}()
	shutCtx, cancel := context.WithTimeout(context.Background(), f.grace+5*time.Second)
	defer cancel()
	for _, a := range locals {
		if err := a.Shutdown(shutCtx); err != nil {
			log.Warn("agent shutdown", "node", a.Name(), "err", err)
		}
	}
	return runErr
}

// agentCheckTimeout bounds each server's answer to agent --check, below
// the image's HEALTHCHECK timeout.
const agentCheckTimeout = 5 * time.Second

// checkAgentServers is agent --check: it asks each server of --server
// (comma-separated) for GET /readyz and succeeds at the first that answers
// 200; otherwise it returns every server's failure.
func checkAgentServers(ctx context.Context, servers string, tlsCfg *tls.Config, stdout io.Writer) error {
	client := &http.Client{
		Timeout:   agentCheckTimeout,
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsCfg},
	}
	defer client.CloseIdleConnections()
	var errs []error
	for _, s := range strings.Split(servers, ",") {
		s = strings.TrimRight(strings.TrimSpace(s), "/")
		if s == "" {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--server %q: want an http:// or https:// URL", s))
			continue
		}
		if err := checkReady(ctx, client, s+"/readyz"); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(stdout, "gpuportal agent: %s is ready\n", s)
		return nil
	}
	if len(errs) == 0 {
		return errors.New("agent --check: --server names no server")
	}
	return fmt.Errorf("agent --check: no server is ready: %w", errors.Join(errs...))
}

// checkReady GETs a readiness URL and wants 200.
func checkReady(ctx context.Context, client *http.Client, readyURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyURL, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", readyURL, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", readyURL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", readyURL, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
