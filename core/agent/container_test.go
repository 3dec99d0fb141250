package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/job"
)

func TestContainerArgs(t *testing.T) {
	base := containerRun{
		Kind: "podman", Name: "gpuportal-gpu-1-7-2", Agent: "gpu-1@/work", Image: "localhost/train:1",
		Argv: []string{"python", "train.py", "--lr", "0.1"}, UID: 1001, GID: 1001, Groups: []uint32{1001, 27},
		Account: "alice", JobDir: "/work/jobs/7", Grace: 10 * time.Second,
	}
	tests := []struct {
		name string
		edit func(*containerRun)
		want []string // in this order, among the arguments
		not  []string
	}{
		{"runs as the account with its groups, an init, a network and IPC of its own", nil,
			[]string{"run", "--rm", "--init", "--name", "gpuportal-gpu-1-7-2", "--label", "gpuportal.agent=gpu-1@/work",
				"--network=private", "--ipc=private", "--shm-size", "1024m", "--user", "1001:1001", "--stop-timeout", "10", "--group-add", "27",
				"--passwd-entry", "alice:*:1001:1001::/work/jobs/7:/bin/sh",
				"--volume", "/work/jobs/7:/work/jobs/7", "--workdir", "/work/jobs/7",
				"localhost/train:1", "python", "train.py", "--lr", "0.1"},
			[]string{"--userns=keep-id", "--cgroup-parent", "--cgroup-manager=cgroupfs", "--device", "--network=host", "--ipc=host", "--publish"}},
		{"/dev/shm as large as the job's memory", func(r *containerRun) { r.ShmMiB = 65536 },
			[]string{"--ipc=private", "--shm-size", "65536m"}, []string{"--ipc=host"}},
		{"the machine's network when the operator says so, IPC still private", func(r *containerRun) { r.Network = NetworkHost },
			[]string{"--network=host", "--ipc=private", "--shm-size", "1024m"}, []string{"--network=private", "--ipc=host"}},
		{"a session's port published on the machine's loopback only", func(r *containerRun) { r.Publish = 8888 },
			[]string{"--network=private", "--publish", "127.0.0.1:8888:8888", "localhost/train:1"}, nil},
		{"no port published on the machine's network", func(r *containerRun) { r.Network, r.Publish = NetworkHost, 8888 },
			[]string{"--network=host"}, []string{"--publish"}},
		{"docker: its bridge", func(r *containerRun) { r.Kind, r.Publish = "docker", 8888 },
			[]string{"--network=bridge", "--ipc=private", "--publish", "127.0.0.1:8888:8888"}, []string{"--network=private"}},
		{"only the job's GPUs, as CDI devices", func(r *containerRun) { r.CDI = []string{"nvidia.com/gpu=2", "nvidia.com/gpu=5"} },
			[]string{"--device", "nvidia.com/gpu=2", "--device", "nvidia.com/gpu=5", "localhost/train:1"}, nil},
		{"the job's cgroup as the parent, cgroupfs for podman", func(r *containerRun) { r.CgroupParent = "/gpuportal/job-7" },
			[]string{"--cgroup-manager=cgroupfs", "run", "--cgroup-parent", "/gpuportal/job-7"}, nil},
		{"docker: the same, without podman's flags", func(r *containerRun) { r.Kind, r.CgroupParent = "docker", "/gpuportal/job-7" },
			[]string{"run", "--user", "1001:1001", "--cgroup-parent", "/gpuportal/job-7", "localhost/train:1"},
			[]string{"--passwd-entry", "--cgroup-manager=cgroupfs", "--userns=keep-id"}},
		{"rootless podman maps the agent's user in", func(r *containerRun) { r.Rootless = true },
			[]string{"--userns=keep-id"}, nil},
		{"the gate's socket mounted", func(r *containerRun) { r.Gate = "/work/gate.sock" },
			[]string{"--volume", "/work/gate.sock:/work/gate.sock"}, nil},
		{"the machine's static srun mounted, read-only, where the image's PATH finds it", func(r *containerRun) { r.Srun = "/usr/local/bin/gpuportal-srun" },
			[]string{"--volume", "/work/jobs/7:/work/jobs/7", "--volume", "/usr/local/bin/gpuportal-srun:/usr/local/bin/srun:ro", "localhost/train:1"}, nil},
		{"values on the command line, secrets by name", func(r *containerRun) {
			r.Values, r.Names = []string{"HOME=/work/jobs/7"}, []string{"GPUPORTAL_GATE_TOKEN"}
		}, []string{"--env", "HOME=/work/jobs/7", "--env", "GPUPORTAL_GATE_TOKEN", "localhost/train:1"}, nil},
		{"the folder the job asked for", func(r *containerRun) { r.Workdir = "/work/jobs/7/src" },
			[]string{"--volume", "/work/jobs/7:/work/jobs/7", "--workdir", "/work/jobs/7/src"}, nil},
		{"a grace under a second is a second", func(r *containerRun) { r.Grace = 300 * time.Millisecond },
			[]string{"--stop-timeout", "1"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			r.Groups = slices.Clone(base.Groups)
			if tc.edit != nil {
				tc.edit(&r)
			}
			args := containerArgs(r)
			if !inOrder(args, tc.want) {
				t.Errorf("args %q\nlack, in this order, %q", args, tc.want)
			}
			for _, n := range tc.not {
				if slices.Contains(args, n) {
					t.Errorf("args %q hold %q", args, n)
				}
			}
			if strings.Contains(strings.Join(args, " "), "--group-add 1001") {
				t.Errorf("args %q add the primary group as a supplementary one", args)
			}
			// The image comes right before the job's argv, which is last.
			if i := slices.Index(args, r.Image); i < 0 || !slices.Equal(args[i+1:], r.Argv) {
				t.Errorf("args %q do not end with the image and the job's argv", args)
			}
		})
	}
}

// inOrder reports whether want appears in args as a subsequence.
func inOrder(args, want []string) bool {
	i := 0
	for _, a := range args {
		if i < len(want) && a == want[i] {
			i++
		}
	}
	return i == len(want)
}

func TestContainerEnv(t *testing.T) {
	jobEnv := []string{"PATH=/usr/bin", "HOME=/work/jobs/7", "LANG=C.UTF-8", "CUDA_VISIBLE_DEVICES=0,1",
		"GPUPORTAL_JOB_ID=7", "GPUPORTAL_GATE_TOKEN=secret", "WANDB_API_KEY=key", "TMPDIR=/var/tmp"}
	agentEnv := []string{"PATH=/sbin:/usr/bin", "HOME=/root", "CONTAINERS_CONF=/etc/x.conf", "WANDB_API_KEY=other"}
	values, names, client := containerEnv(jobEnv, agentEnv, nil)
	if want := []string{"HOME=/work/jobs/7", "LANG=C.UTF-8"}; !slices.Equal(values, want) {
		t.Errorf("values %q, want %q (PATH and TMPDIR are the image's)", values, want)
	}
	if want := []string{"CUDA_VISIBLE_DEVICES", "GPUPORTAL_JOB_ID", "GPUPORTAL_GATE_TOKEN", "WANDB_API_KEY"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	// The client keeps its own HOME, PATH and configuration, and gets the
	// job's values of the variables passed by name.
	for _, kv := range []string{"PATH=/sbin:/usr/bin", "HOME=/root", "CONTAINERS_CONF=/etc/x.conf", "WANDB_API_KEY=key", "GPUPORTAL_GATE_TOKEN=secret"} {
		if !slices.Contains(client, kv) {
			t.Errorf("client env %q lacks %s", client, kv)
		}
	}
	if slices.Contains(client, "WANDB_API_KEY=other") {
		t.Error("the agent's own value of a job's variable reached the client")
	}
	// A PATH the job set itself goes in; the machine's does not.
	values, _, _ = containerEnv(append(jobEnv, "PATH=/opt/conda/bin:/usr/bin"), agentEnv, map[string]bool{"PATH": true})
	if !slices.Contains(values, "PATH=/opt/conda/bin:/usr/bin") {
		t.Errorf("values %q lack the job's own PATH", values)
	}
}

func TestContainerName(t *testing.T) {
	for node, want := range map[string]string{
		"gpu-07":       "gpuportal-gpu-07-41-3",
		"rack 3/gpu:1": "gpuportal-rack_3_gpu_1-41-3",
	} {
		if got := containerName(node, job.RunRef{Job: 41, Run: 3}); got != want {
			t.Errorf("containerName(%q) = %q, want %q", node, got, want)
		}
	}
}

func TestHasNvidiaCDI(t *testing.T) {
	dir := t.TempDir()
	if HasNvidiaCDI([]string{dir, filepath.Join(dir, "absent")}) {
		t.Error("an empty folder has a CDI spec")
	}
	if err := os.WriteFile(filepath.Join(dir, "other.yaml"), []byte("kind: vendor.com/fpga\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if HasNvidiaCDI([]string{dir}) {
		t.Error("another vendor's spec counts as NVIDIA's")
	}
	if err := os.WriteFile(filepath.Join(dir, "nvidia.yaml"), []byte("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !HasNvidiaCDI([]string{dir}) {
		t.Error("nvidia-ctk's spec not found")
	}
}

func TestCudaDevicesInAContainer(t *testing.T) {
	for n, want := range map[int]string{1: "0", 3: "0,1,2"} {
		if got := cudaDevices(n); got != want {
			t.Errorf("cudaDevices(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestContainerNetworkValue: --container-network takes private (the
// default) or host, and names both when given anything else.
func TestContainerNetworkValue(t *testing.T) {
	var n ContainerNetwork
	if n.String() != "private" {
		t.Errorf("the default is %q, want private", n)
	}
	for _, tc := range []struct {
		in, want, err string
	}{
		{"private", "private", ""},
		{"host", "host", ""},
		{"bridge", "", `"bridge": want private (the default) or host`},
		{"", "", `"": want private (the default) or host`},
		{"HOST", "", `"HOST": want private (the default) or host`},
	} {
		var got ContainerNetwork
		err := got.Set(tc.in)
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("Set(%q): %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got.String() != tc.want):
			t.Errorf("Set(%q): %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestContainerSessionHost: a session's server listens on the machine's
// loopback, except in a container with a network of its own, where it
// listens on the container's interfaces (its port published on the
// machine's loopback); /dev/shm is the job's memory.
func TestContainerSessionHost(t *testing.T) {
	sess := &job.Session{Type: job.SessionJupyter}
	for _, tc := range []struct {
		name string
		cc   *ContainerConfig
		spec job.Spec
		want string
	}{
		{"a command", &ContainerConfig{}, job.Spec{Session: sess}, "127.0.0.1"},
		{"a container, private network", &ContainerConfig{}, job.Spec{Session: sess, Image: "localhost/nb:1"}, "0.0.0.0"},
		{"a container on the machine's network", &ContainerConfig{Network: NetworkHost}, job.Spec{Session: sess, Image: "localhost/nb:1"}, "127.0.0.1"},
	} {
		a := &Local{cfg: Config{Containers: tc.cc}}
		if got := a.sessionHost(tc.spec); got != tc.want {
			t.Errorf("%s: listens on %s, want %s", tc.name, got, tc.want)
		}
	}
	a := &Local{cfg: Config{Backend: gpu.NewSim("n0", 4, 8192), MemMiB: 4 * 65536}}
	if got := a.jobMemMiB(job.Spec{GPUs: []int{0, 1}}); got != 2*65536 {
		t.Errorf("the memory of a job of 2 GPUs of 4, without an allocation: %d MiB, want its share %d", got, 2*65536)
	}
	if got := a.jobMemMiB(job.Spec{GPUs: []int{0}, Resources: &job.Resources{MemMiB: 3000}}); got != 3000 {
		t.Errorf("the memory of a job allocated 3000 MiB: %d", got)
	}
}
