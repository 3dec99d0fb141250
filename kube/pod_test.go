package kube

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/job"
)

// TestNodeCapabilities: a Kubernetes node has the capabilities
// core/engine's list (engine.Capabilities) claims for it.
func TestNodeCapabilities(t *testing.T) {
	want := []string{"ResumeReporter", "RunGPUsReporter", "LiveMemoryNode"}
	if got := engine.Capabilities((*node)(nil)); !slices.Equal(got, want) {
		t.Errorf("a Kubernetes node has %v, core/engine/capabilities.go claims %v", got, want)
	}
}

func terminated(phase corev1.PodPhase, reason string, t corev1.ContainerStateTerminated) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, Reason: reason,
		ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Terminated: &t}}}}}
}

func TestPodEnding(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want ending
	}{
		{"succeeded", terminated(corev1.PodSucceeded, "", corev1.ContainerStateTerminated{Reason: "Completed"}), ending{}},
		{"its own exit code", terminated(corev1.PodFailed, "", corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}), ending{code: 3}},
		{"out of memory", terminated(corev1.PodFailed, "", corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}),
			ending{code: -1, why: "out of memory: Kubernetes killed the container (OOMKilled, exit code 137)"}},
		{"evicted", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}},
			ending{code: -1, why: "evicted by Kubernetes: The node was low on resource: memory.", infra: true}},
		{"deadline", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"}},
			ending{code: -1, why: "the time limit was reached (Kubernetes' active deadline)", endedAs: job.TimedOut}},
		{"refused by the kubelet", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfcpu"}},
			ending{code: -1, why: "the node refused or lost it (OutOfcpu)", infra: true}},
		{"signal", terminated(corev1.PodFailed, "", corev1.ContainerStateTerminated{ExitCode: 143, Signal: 15}),
			ending{code: -1, why: "killed by signal 15 (terminated)"}},
		{"failed without a status", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, ending{code: -1, why: "the pod failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podEnding(tc.pod); got != tc.want {
				t.Errorf("podEnding = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStuck(t *testing.T) {
	waiting := func(reason, msg string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Image: "lab/train:1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: containerName,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"pulling", waiting("ContainerCreating", ""), ""},
		{"no status yet", &corev1.Pod{}, ""},
		{"image pull back-off", waiting("ImagePullBackOff", "Back-off pulling image"),
			"the image lab/train:1 could not be pulled (ImagePullBackOff): Back-off pulling image"},
		{"bad image name", waiting("InvalidImageName", ""), "the image lab/train:1 could not be pulled (InvalidImageName)"},
		{"config", waiting("CreateContainerConfigError", "secret \"x\" not found"),
			"the container could not be created (CreateContainerConfigError): secret \"x\" not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stuck(tc.pod); got != tc.want {
				t.Errorf("stuck = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewPod(t *testing.T) {
	s := job.Spec{JobID: 42, Run: 3, GPUs: []int{5, 2}, SimRemaining: 90 * time.Second, Team: "vision lab",
		TimeLeft: time.Hour, Env: []string{"DATA=/d", "NVIDIA_VISIBLE_DEVICES=all"}, Resources: &job.Resources{CPUMilli: 6000, MemMiB: 32768}}
	gpus := []int{2, 5}
	p := newPod(podSpec{prefix: "gp", namespace: "ns", image: "busybox", node: "n7", team: s.Team, grace: 10 * time.Second, env: jobEnv(s, gpus, "gp", "ns")}, s, gpus)
	if p.Name != "gp-42-3-n7" || p.Namespace != "ns" {
		t.Errorf("pod %s/%s, want ns/gp-42-3-n7", p.Namespace, p.Name)
	}
	wantLabels := map[string]string{LabelManagedBy: "gpuportal", LabelInstance: "gp", LabelJob: "42", LabelRun: "3", LabelTeam: "vision_lab"}
	for k, v := range wantLabels {
		if p.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, p.Labels[k], v)
		}
	}
	if !gated(p) || p.Spec.Affinity != nil || p.Spec.NodeName != "" {
		t.Errorf("a new pod is gated, without affinity or node: gates %v affinity %v node %q", p.Spec.SchedulingGates, p.Spec.Affinity, p.Spec.NodeName)
	}
	if p.Annotations[AnnotationGPUs] != "2,5" || p.Annotations[AnnotationSimDuration] != "90.000s" || p.Annotations[AnnotationNode] != "n7" {
		t.Errorf("annotations %v", p.Annotations)
	}
	c := p.Spec.Containers[0]
	if !slices.Equal(c.Command, []string{"sleep", "90.000"}) || c.Image != "busybox" {
		t.Errorf("container %v %v, want busybox sleep 90.000", c.Image, c.Command)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["NVIDIA_VISIBLE_DEVICES"] != "2,5" || env["DATA"] != "/d" || env["GPUPORTAL_JOB_ID"] != "42" {
		t.Errorf("env %v: want NVIDIA_VISIBLE_DEVICES=2,5 (not the job's), DATA, GPUPORTAL_JOB_ID", env)
	}
	if env["GPUPORTAL_CPUS"] != "6" || env["SLURM_CPUS_PER_TASK"] != "6" || env["GPUPORTAL_MEM_MIB"] != "32768" {
		t.Errorf("env %v: want the CPUs and memory the pod requests", env)
	}
	if cpu := c.Resources.Requests[corev1.ResourceCPU]; cpu.MilliValue() != 6000 {
		t.Errorf("the pod requests %v CPUs, want 6", cpu.String())
	}
	if _, ok := c.Resources.Limits[ResourceGPU]; ok {
		t.Error("the pod asks the device plugin for GPUs: gpuportal pins them itself")
	}
	if p.Spec.ActiveDeadlineSeconds == nil || *p.Spec.ActiveDeadlineSeconds != 3610 {
		t.Errorf("active deadline %v, want the time left and the backstop margin, 3610", p.Spec.ActiveDeadlineSeconds)
	}
	if a := p.Spec.AutomountServiceAccountToken; a == nil || *a {
		t.Error("the job's pod mounts a service account token")
	}
	a := pinAffinity("n7").NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0]
	if a.Key != "metadata.name" || !slices.Equal(a.Values, []string{"n7"}) {
		t.Errorf("affinity %+v, want metadata.name in [n7]", a)
	}
}

func TestLabelValueAndPodName(t *testing.T) {
	for in, want := range map[string]string{"vision": "vision", "a b/c": "a_b_c", "-x-": "x", strings.Repeat("a", 70): strings.Repeat("a", 63)} {
		if got := labelValue(in); got != want {
			t.Errorf("labelValue(%q) = %q, want %q", in, got, want)
		}
	}
	if n := podName("gpuportal", 1, 1, strings.Repeat("n", 300)); len(n) > 253 {
		t.Errorf("pod name of %d characters", len(n))
	}
}

func TestReadNodeAndForeignGPUs(t *testing.T) {
	kn := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{labelGPUProduct: "NVIDIA-H100", labelGPUMemory: "81559"}},
		Spec:       corev1.NodeSpec{Unschedulable: true},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{ResourceGPU: resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("95500m"),
				corev1.ResourceMemory: resource.MustParse("512Gi")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"}},
		},
	}
	st := readNode(kn, 1024)
	want := nodeState{gpus: 8, model: "NVIDIA-H100", gpuMemMi: 81559, cpus: 95, memMiB: 512 << 10, cordoned: true, notReady: "Ready is False (KubeletNotReady)"}
	if st != want {
		t.Errorf("readNode = %+v, want %+v", st, want)
	}
	n := &node{}
	// Two GPUs held by other pods; gpuportal's run holds 7: 6 and 5 are
	// left out.
	n.updateLocked(st, 2, map[int]bool{7: true})
	var idx []int
	for _, d := range n.devices {
		idx = append(idx, d.Index)
	}
	if !slices.Equal(idx, []int{0, 1, 2, 3, 4, 7}) {
		t.Errorf("devices %v, want 0-4 and 7", idx)
	}
	if err := n.checkGPUsLocked([]int{6}); err != nil {
		t.Errorf("GPU 6 exists (a run may hold it): %v", err)
	}
	if err := n.checkGPUsLocked([]int{8}); err == nil {
		t.Error("GPU 8 of 8 accepted")
	}
}

func TestGPURequest(t *testing.T) {
	gpus := func(n string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{ResourceGPU: resource.MustParse(n)}}
	}
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Resources: gpus("4")}},
		Containers:     []corev1.Container{{Resources: gpus("1")}, {Resources: gpus("2")}, {}},
	}}
	if got := gpuRequest(p); got != 4 {
		t.Errorf("gpuRequest = %d, want 4 (the init container's)", got)
	}
	p.Spec.InitContainers = nil
	if got := gpuRequest(p); got != 3 {
		t.Errorf("gpuRequest = %d, want 3", got)
	}
}

// TestNewGangPod: a part of a gang is named in DNS by its rank, says how
// many parts its run has, and gets the rendezvous with each machine's
// address its pod's name, and its hostfile from its annotation.
func TestNewGangPod(t *testing.T) {
	g := &job.Gang{Nodes: []job.GangNode{{Name: "n1", Addr: "127.0.0.1", GPUs: 8}, {Name: "n2", Addr: "127.0.0.1", GPUs: 8}}, Rank: 1, MasterPort: 29500}
	s := job.Spec{JobID: 7, Run: 2, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Gang: g, Command: []string{"train"}}
	p := newPod(podSpec{prefix: "gp", namespace: "jobs", image: "img", node: "n2", env: jobEnv(s, s.GPUs, "gp", "jobs")}, s, s.GPUs)
	if p.Name != "gp-7-2-n2" || p.Spec.Hostname != "gp-7-2-r1" || p.Spec.Subdomain != "gp" {
		t.Errorf("pod %s, host %s.%s: want gp-7-2-n2, gp-7-2-r1.gp", p.Name, p.Spec.Hostname, p.Spec.Subdomain)
	}
	const hostfile = "gp-7-2-r0.gp.jobs.svc slots=8\ngp-7-2-r1.gp.jobs.svc slots=8\n"
	if p.Annotations[AnnotationParts] != "2" || p.Annotations[AnnotationHostfile] != hostfile {
		t.Errorf("annotations %v", p.Annotations)
	}
	env := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for k, v := range map[string]string{"MASTER_ADDR": "gp-7-2-r0.gp.jobs.svc", "MASTER_PORT": "29500", "NODE_RANK": "1", "NNODES": "2",
		"WORLD_SIZE": "16", "GPUPORTAL_HOSTFILE": HostfilePath, "NVIDIA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"} {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	vm := p.Spec.Containers[0].VolumeMounts
	if len(vm) != 1 || vm[0].MountPath != "/etc/gpuportal" || len(p.Spec.Volumes) != 1 ||
		p.Spec.Volumes[0].DownwardAPI.Items[0].Path != "hostfile" ||
		p.Spec.Volumes[0].DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.annotations['gpuportal.io/hostfile']" {
		t.Errorf("the hostfile's volume: %+v %+v", vm, p.Spec.Volumes)
	}
}

// TestNewPodCheckpointFolder: with a checkpoint claim, a run's pod mounts
// its job's folder of the claim (and no other) at CheckpointMount; without
// one it mounts none.
func TestNewPodCheckpointFolder(t *testing.T) {
	s := job.Spec{JobID: 42, Run: 2, GPUs: []int{0}, Command: []string{"python", "train.py"}}
	for _, claim := range []string{"", "ckpt"} {
		p := newPod(podSpec{prefix: "gp", namespace: "ns", image: "img", node: "n0", checkpointClaim: claim}, s, []int{0})
		var vol *corev1.Volume
		for i := range p.Spec.Volumes {
			if v := &p.Spec.Volumes[i]; v.PersistentVolumeClaim != nil {
				vol = v
			}
		}
		mounts := p.Spec.Containers[0].VolumeMounts
		if claim == "" {
			if vol != nil || len(mounts) != 0 {
				t.Errorf("no claim: volume %+v, mounts %+v; want none", vol, mounts)
			}
			continue
		}
		if vol == nil || vol.PersistentVolumeClaim.ClaimName != claim || vol.PersistentVolumeClaim.ReadOnly {
			t.Fatalf("claim %s: volume %+v, want the claim, writable", claim, vol)
		}
		if len(mounts) != 1 || mounts[0].Name != vol.Name || mounts[0].MountPath != CheckpointMount ||
			mounts[0].SubPath != "job-42" || mounts[0].ReadOnly {
			t.Errorf("claim %s: mounts %+v, want only the claim's job-42 at %s, writable", claim, mounts, CheckpointMount)
		}
	}
}

// TestCheckpointSettings: the checkpoint claim and the server's view of
// it come together, each checked, with an error naming the flag.
func TestCheckpointSettings(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		claim, dir string
		want       string // in the error; empty: accepted
	}{
		{"", "", ""},
		{"ckpt", dir, ""},
		{"ckpt", "", "--kube-checkpoint-claim needs --kube-checkpoint-dir"},
		{"", dir, "--kube-checkpoint-dir without --kube-checkpoint-claim"},
		{"Ckpt_1", dir, `--kube-checkpoint-claim "Ckpt_1"`},
		{"ckpt", "relative/dir", "want an absolute path"},
		{"ckpt", dir + "/missing", "not a folder"},
	}
	for _, tc := range tests {
		_, err := New(Config{Core: &Client{}, Registry: nopRegistry{}, Namespace: "ns", Image: "img",
			CheckpointClaim: tc.claim, CheckpointDir: tc.dir})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("claim %q, dir %q: %v, want accepted", tc.claim, tc.dir, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("claim %q, dir %q: error %v, want one saying %q", tc.claim, tc.dir, err, tc.want)
		}
	}
}

// TestBeginRunResumes: the server makes the job's folder writable by any
// user of the container, and a run that finds files there is told it
// resumes, from the run that wrote them, and reports so (Resumes).
func TestBeginRunResumes(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	e, err := New(Config{Core: &Client{}, Registry: nopRegistry{}, Namespace: "ns", Image: "img",
		CheckpointClaim: "ckpt", CheckpointDir: dir, RunDir: t.TempDir(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	s := job.Spec{JobID: 7, Run: 1, GPUs: []int{0}, Command: []string{"python", "train.py"}}
	res, env, err := e.beginRun(s)
	if err != nil || res.Resumed() || len(env) != 0 {
		t.Fatalf("run 1: %+v %v %v; want a start from scratch", res, env, err)
	}
	folder := filepath.Join(dir, "job-7")
	if st, err := os.Stat(folder); err != nil || st.Mode().Perm() != 0o777 {
		t.Fatalf("the job's folder: %v %v; want it made, mode 0777 (the container's user is the image's)", st, err)
	}
	// Run 1 saves a checkpoint, as the job would through its mount.
	now = now.Add(time.Minute)
	ck := filepath.Join(folder, "step-100.pt")
	if err := os.WriteFile(ck, []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(ck, now, now); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	s.Run = 2
	res, env, err = e.beginRun(s)
	if err != nil || !res.Resumed() || res.FromRun != 1 || res.Run != 2 {
		t.Fatalf("run 2: %+v %v; want it to resume from run 1's checkpoint", res, err)
	}
	if !slices.Contains(env, "GPUPORTAL_RESUME=1") || !slices.Contains(env, "GPUPORTAL_RESUME_RUN=1") {
		t.Errorf("run 2's variables %v; want GPUPORTAL_RESUME=1 and GPUPORTAL_RESUME_RUN=1", env)
	}
	// A simulated job (no command) gets its folder, and nothing to resume.
	sim := job.Spec{JobID: 8, Run: 2, GPUs: []int{0}}
	if res, env, err := e.beginRun(sim); err != nil || res.Run != 0 || len(env) != 0 {
		t.Errorf("a simulated job: %+v %v %v; want nothing", res, env, err)
	}
	n := &node{e: e, name: "n0"}
	e.runs["gp-7-2-n0"] = &run{pod: "gp-7-2-n0", jobID: 7, run: 2, node: "n0", resume: res}
	if got := n.Resumes()[7]; got != res {
		t.Errorf("the node reports %+v for job 7, want %+v", got, res)
	}
}

// nopRegistry is a Registry that registers nothing.
type nopRegistry struct{}

func (nopRegistry) AddNode(context.Context, engine.Node) error { return nil }
func (nopRegistry) RemoveNode(context.Context, string) error   { return nil }
func (nopRegistry) MirrorDraining(string, bool) error          { return nil }
func (nopRegistry) NodeStatuses() []engine.NodeStatus          { return nil }
func (nopRegistry) Exits() chan<- job.Exit                     { return nil }

// TestPodRunsAsNonRoot: a run's container runs as the executor's user and
// group, never root, whatever its image says, and asks the kubelet to
// refuse it otherwise; it gains no privileges and has no capabilities (the
// restricted Pod Security Standard), and has a home it can write unless
// the job names one.
func TestPodRunsAsNonRoot(t *testing.T) {
	tests := []struct {
		name     string
		uid, gid int64
		env      []string
		wantUID  int64
		wantGID  int64
		wantHome string
	}{
		{"the default", 0, 0, nil, DefaultRunAs, DefaultRunAs, "/tmp"},
		{"chosen", 2001, 3001, nil, 2001, 3001, "/tmp"},
		{"the job's home", 2001, 3001, []string{"HOME=/work"}, 2001, 3001, "/work"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := job.Spec{JobID: 9, Run: 1, GPUs: []int{0}, Command: []string{"python", "train.py"}}
			p := newPod(podSpec{prefix: "gp", namespace: "ns", image: "img", node: "n0", env: tc.env, uid: tc.uid, gid: tc.gid}, s, []int{0})
			sc := p.Spec.SecurityContext
			if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != tc.wantUID ||
				sc.RunAsGroup == nil || *sc.RunAsGroup != tc.wantGID || sc.SeccompProfile == nil ||
				sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Fatalf("pod security %+v; want non-root, UID %d, GID %d, the runtime's seccomp profile", sc, tc.wantUID, tc.wantGID)
			}
			c := p.Spec.Containers[0].SecurityContext
			if c == nil || c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation || c.Capabilities == nil ||
				!slices.Equal(c.Capabilities.Drop, []corev1.Capability{"ALL"}) || c.Privileged != nil {
				t.Errorf("container security %+v; want no privilege escalation, every capability dropped", c)
			}
			var homes []string
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == "HOME" {
					homes = append(homes, e.Value)
				}
			}
			if !slices.Equal(homes, []string{tc.wantHome}) {
				t.Errorf("HOME %v, want only %s", homes, tc.wantHome)
			}
		})
	}
}

func TestParseRunAs(t *testing.T) {
	tests := []struct {
		in       string
		uid, gid int64
		err      string
	}{
		{"1000:1000", 1000, 1000, ""},
		{"2001:50", 2001, 50, ""},
		{"0:1000", 0, 0, "never run as root"},
		{"1000:0", 0, 0, "root's group"},
		{"1000", 0, 0, "want UID:GID"},
		{"a:b", 0, 0, "want UID:GID"},
		{"-1:5", 0, 0, "want UID:GID"},
		{"4294967296:5", 0, 0, "want UID:GID"},
	}
	for _, tc := range tests {
		uid, gid, err := ParseRunAs(tc.in)
		switch {
		case tc.err == "" && (err != nil || uid != tc.uid || gid != tc.gid):
			t.Errorf("ParseRunAs(%q) = %d, %d, %v; want %d, %d", tc.in, uid, gid, err, tc.uid, tc.gid)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "--kube-run-as")):
			t.Errorf("ParseRunAs(%q): error %v, want one naming --kube-run-as and saying %q", tc.in, err, tc.err)
		}
	}
}
