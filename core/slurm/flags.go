package slurm

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/engine"
)

// defaultGPUMemMiB is the memory of a GPU whose type the configuration
// does not name: 80 GB.
const defaultGPUMemMiB = 80 * 1024

// GPUMemory is the memory of the GPUs by gres type, since Slurm does not
// know it.
type GPUMemory struct {
	DefaultMiB int64            // for types not in ByType
	ByType     map[string]int64 // MiB by gres type (a100, ...)
}

// For is the memory of a GPU of gres type typ.
func (m GPUMemory) For(typ string) int64 {
	if v, ok := m.ByType[typ]; ok {
		return v
	}
	if m.DefaultMiB > 0 {
		return m.DefaultMiB
	}
	return defaultGPUMemMiB
}

// ParseGPUMemory reads GPU memory in GB: "80" for every GPU, or
// "a100=80,v100=32,16" by gres type with a default.
func ParseGPUMemory(s string) (GPUMemory, error) {
	m := GPUMemory{DefaultMiB: defaultGPUMemMiB}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		typ, gb, typed := strings.Cut(part, "=")
		if !typed {
			typ, gb = "", part
		}
		v, err := strconv.ParseFloat(gb, 64)
		if err != nil || v <= 0 || v > 1<<20 || (typed && typ == "") {
			return m, fmt.Errorf("GPU memory %q: want GB such as 80, or TYPE=GB such as a100=80", part)
		}
		mib := int64(v * 1024)
		if !typed {
			m.DefaultMiB = mib
			continue
		}
		if m.ByType == nil {
			m.ByType = make(map[string]int64)
		}
		m.ByType[typ] = mib
	}
	return m, nil
}

// Flags are serve's settings of the Slurm executor (serve --executor
// slurm).
type Flags struct {
	Partition    string
	WorkDir      string
	RunAs        string
	MinUID       int
	JobPrefix    string
	GPUMem       string
	JobComp      string
	Bin          string
	Poll         time.Duration
	StartTimeout time.Duration
}

// Register adds the --slurm-* flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Partition, "slurm-partition", "", "with --executor slurm: the partition whose nodes gpuportal schedules (default: every node, Slurm's default partition)")
	fs.StringVar(&f.WorkDir, "slurm-work-dir", "", "with --executor slurm: folder on a file system shared by the server and every node, for job output and checkpoints (default DATA/slurm)")
	fs.StringVar(&f.RunAs, "slurm-run-as", "", "with --executor slurm: who jobs run as (sbatch --uid and --gid): owner (each job as its owner's Unix account; the server runs as root), or one USER for every job; jobs never run as root unless this says root")
	fs.IntVar(&f.MinUID, "slurm-min-uid", agent.DefaultMinUID, "with --slurm-run-as owner: the lowest user ID a job runs as; the system's accounts below it never run jobs, nor root")
	fs.StringVar(&f.JobPrefix, "slurm-job-prefix", "gpuportal", "with --executor slurm: Slurm job names are PREFIX-ID; one prefix per server sharing a cluster")
	fs.StringVar(&f.GPUMem, "slurm-gpu-mem", "80", "with --executor slurm: GPU memory in GB, which Slurm does not know: 80, or by gres type: a100=80,v100=32,16")
	fs.StringVar(&f.JobComp, "slurm-jobcomp", "", "with --executor slurm: Slurm's job completion log (JobCompType=jobcomp/filetxt), for jobs squeue forgot")
	fs.StringVar(&f.Bin, "slurm-bin", "", "with --executor slurm: folder of sbatch, squeue, ... (default: found in PATH)")
	fs.DurationVar(&f.Poll, "slurm-poll", time.Second, "with --executor slurm: time between readings of Slurm's state")
	fs.DurationVar(&f.StartTimeout, "slurm-start-timeout", 30*time.Second, "with --executor slurm: a released job Slurm has not started by then is cancelled")
}

// Start makes the Slurm cluster the flags describe execute the engine's
// jobs: it creates an Executor and runs it until ctx ends. dataDir is
// serve's --data; grace is the time between SIGTERM and the end of a job
// being stopped.
func (f Flags) Start(ctx context.Context, dataDir string, grace time.Duration, reg Registry, log *slog.Logger) error {
	mem, err := ParseGPUMemory(f.GPUMem)
	if err != nil {
		return fmt.Errorf("--slurm-gpu-mem: %w", err)
	}
	dir := f.WorkDir
	if dir == "" {
		dir = filepath.Join(dataDir, "slurm")
		if err := openDataDir(dataDir, f.RunAs); err != nil {
			return err
		}
	}
	ex, err := New(Config{
		Client: CLI{Runner: ExecRunner{Bin: f.Bin}}, Registry: reg, Logger: log,
		WorkDir: dir, Partition: f.Partition, RunAs: f.RunAs, MinUID: f.MinUID, JobPrefix: f.JobPrefix,
		Poll: f.Poll, Grace: grace, StartTimeout: f.StartTimeout, GPUMemory: mem, JobCompFile: f.JobComp,
	})
	if err != nil {
		return err
	}
	if m, ok := reg.(engine.Monitors); ok {
		ex.cfg.Monitors = m
	}
	log.Info("running jobs on Slurm", "partition", f.Partition, "work_dir", ex.cfg.WorkDir)
	go ex.Run(ctx)
	return nil
}

// openDataDir lets the accounts jobs run as pass through serve's data
// folder, which holds the default work folder, DATA/slurm, and read
// nothing of it (0711, as serve --dev does for its agents' jobs); the
// folder is left as it is when jobs run as the server's own user. A user
// --slurm-run-as cannot find is New's to report.
func openDataDir(dataDir, runAsName string) error {
	euid := os.Geteuid()
	ra, err := lookupRunAs(runAsName, euid)
	if err != nil || !runsAsOthers(runAsName, ra, euid) {
		return nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("slurm executor: data folder: %w", err)
	}
	if err := os.Chmod(dataDir, 0o711); err != nil {
		return fmt.Errorf("slurm executor: let jobs' accounts pass through the data folder %s: %w", dataDir, err)
	}
	return nil
}
