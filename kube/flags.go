package kube

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpuportal/gpuportal/core/engine"
)

// Flags are serve's settings of the Kubernetes executor (serve
// --executor kubernetes).
type Flags struct {
	Config       string
	Namespace    string
	Prefix       string
	NodeSelector string
	Image        string
	GPUMem       string
	StartTimeout time.Duration
	QPS          float64
	// CheckpointClaim and CheckpointDir: the jobs' checkpoint folders
	// (Config.CheckpointClaim, Config.CheckpointDir).
	CheckpointClaim string
	CheckpointDir   string
	// RunAs is UID:GID, the user and group of the jobs' containers
	// (Config.RunAsUID).
	RunAs string
}

// Register adds the --kube-* flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Config, "kube-config", "", "with --executor kubernetes: the kubeconfig file to reach the API server with (default: the pod's service account inside a cluster, else $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.Namespace, "kube-namespace", "gpuportal", "with --executor kubernetes: the namespace of the jobs' pods")
	fs.StringVar(&f.Prefix, "kube-prefix", "gpuportal", "with --executor kubernetes: pods are named PREFIX-JOB-RUN-NODE and labelled gpuportal.io/instance=PREFIX; one prefix per server sharing a cluster")
	fs.StringVar(&f.NodeSelector, "kube-node-selector", "", "with --executor kubernetes: a label selector of the nodes gpuportal schedules (default: every node with nvidia.com/gpu)")
	fs.StringVar(&f.Image, "kube-image", "busybox:stable", "with --executor kubernetes: the container image of jobs that name none (job submit --image)")
	fs.StringVar(&f.GPUMem, "kube-gpu-mem", "80", "with --executor kubernetes: GPU memory in GB of nodes without GPU feature discovery's nvidia.com/gpu.memory label")
	fs.DurationVar(&f.StartTimeout, "kube-start-timeout", 2*time.Minute, "with --executor kubernetes: a pod whose GPUs are still held by pods being deleted after this long fails")
	fs.Float64Var(&f.QPS, "kube-qps", 50, "with --executor kubernetes: the most requests a second to the API server (bursts of twice as many)")
	fs.StringVar(&f.CheckpointClaim, "kube-checkpoint-claim", "", "with --executor kubernetes: a PersistentVolumeClaim in --kube-namespace (ReadWriteMany, so that a job resumes on any node) whose folder job-ID each run of job ID finds at $GPUPORTAL_CHECKPOINT_DIR; needs --kube-checkpoint-dir")
	fs.StringVar(&f.CheckpointDir, "kube-checkpoint-dir", "", "with --kube-checkpoint-claim: where this server sees that claim's volume (mounted here too): it makes each job's folder and tells each run what it resumes from")
	fs.StringVar(&f.RunAs, "kube-run-as", "1000:1000", "with --executor kubernetes: UID:GID the jobs' containers run as, never root's (0): the pods ask Kubernetes to refuse a container that would run as root")
}

// Start makes the Kubernetes cluster the flags describe execute the
// engine's jobs: it creates an Executor and runs it until ctx ends. The
// jobs' output is kept under dataDir/kube/jobs (LogDir); grace is the
// pods' termination grace period.
func (f Flags) Start(ctx context.Context, dataDir string, grace time.Duration, reg Registry, log *slog.Logger) error {
	gb, err := strconv.ParseFloat(f.GPUMem, 64)
	if err != nil || gb <= 0 || gb > 1<<20 {
		return fmt.Errorf("--kube-gpu-mem %q: want GB such as 80", f.GPUMem)
	}
	if f.QPS <= 0 {
		return fmt.Errorf("--kube-qps %v: must be positive", f.QPS)
	}
	uid, gid, err := ParseRunAs(f.RunAs)
	if err != nil {
		return err
	}
	cfg, err := f.restConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(f.QPS), int(2*f.QPS)
	cfg.UserAgent = "gpuportal"
	core, err := NewClient(cfg)
	if err != nil {
		return fmt.Errorf("--kube-config: %w", err)
	}
	// Following the pods' output and reaching sessions hold requests open
	// for long: their own client, apart from the rate of creates and
	// binds.
	streams := rest.CopyConfig(cfg)
	streams.QPS, streams.Burst = float32(f.QPS), int(2*f.QPS)
	logCore, err := NewClient(streams)
	if err != nil {
		return fmt.Errorf("--kube-config: %w", err)
	}
	dial, err := podDialer(streams, logCore, f.Namespace)
	if err != nil {
		return fmt.Errorf("--kube-config: %w", err)
	}
	logDir, runDir := "", ""
	if dataDir != "" {
		logDir, runDir = filepath.Join(dataDir, "kube", "jobs"), filepath.Join(dataDir, "kube", "runs")
	}
	ex, err := New(Config{Core: core, Registry: reg, Logger: log, Namespace: f.Namespace, Prefix: f.Prefix,
		NodeSelector: f.NodeSelector, Image: f.Image, GPUMemMiB: int64(gb * 1024), Grace: grace, StartTimeout: f.StartTimeout,
		LogDir: logDir, LogCore: logCore, DialPod: dial,
		CheckpointClaim: f.CheckpointClaim, CheckpointDir: f.CheckpointDir, RunDir: runDir, RunAsUID: uid, RunAsGID: gid})
	if err != nil {
		return err
	}
	if m, ok := reg.(engine.Monitors); ok {
		ex.cfg.Monitors = m
	}
	log.Info("running jobs on Kubernetes", "api_server", cfg.Host, "namespace", f.Namespace, "node_selector", f.NodeSelector)
	go ex.Run(ctx)
	return nil
}

// restConfig is how to reach the API server: --kube-config, else the
// service account of the pod gpuportal runs in, else $KUBECONFIG or
// ~/.kube/config.
func (f Flags) restConfig() (*rest.Config, error) {
	if f.Config == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.Config != "" {
		rules.ExplicitPath = f.Config
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--kube-config: %w", err)
	}
	return cfg, nil
}

// ParseRunAs reads --kube-run-as, UID:GID: neither root's (0).
func ParseRunAs(v string) (uid, gid int64, err error) {
	u, g, ok := strings.Cut(v, ":")
	if ok {
		uid, err = strconv.ParseInt(u, 10, 64)
	}
	if ok && err == nil {
		gid, err = strconv.ParseInt(g, 10, 64)
	}
	switch {
	case !ok || err != nil || uid < 0 || gid < 0 || uid > math.MaxInt32 || gid > math.MaxInt32:
		return 0, 0, fmt.Errorf("--kube-run-as %q: want UID:GID, such as 1000:1000", v)
	case uid == 0:
		return 0, 0, fmt.Errorf("--kube-run-as %q: jobs never run as root (UID 0)", v)
	case gid == 0:
		return 0, 0, fmt.Errorf("--kube-run-as %q: jobs never run in root's group (GID 0)", v)
	}
	return uid, gid, nil
}
