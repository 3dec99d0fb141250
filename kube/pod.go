package kube

import (
	"cmp"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuportal/gpuportal/core/job"
)

// The labels and annotations of gpuportal's pods, and its scheduling
// gate.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "gpuportal"
	LabelInstance  = "gpuportal.io/instance" // the executor's prefix: one per server sharing a cluster
	LabelJob       = "gpuportal.io/job"
	LabelRun       = "gpuportal.io/run"
	LabelTeam      = "gpuportal.io/team"
	// AnnotationGPUs are the indices of the node's GPUs the run holds,
	// "0,3", which NVIDIA_VISIBLE_DEVICES pins.
	AnnotationGPUs = "gpuportal.io/gpus"
	// AnnotationNode is the node gpuportal chose for the run.
	AnnotationNode = "gpuportal.io/node"
	// AnnotationParts is how many pods, one per machine, the run has:
	// more than 1 for a gang (a job on several machines).
	AnnotationParts = "gpuportal.io/parts"
	// AnnotationRank is the rank of a gang's pod (0 for the first part,
	// and for a job on one machine), whose output the server keeps as
	// the job's (rank 0) or beside it.
	AnnotationRank = "gpuportal.io/rank"
	// AnnotationHostfile is a gang's hostfile (job.Gang.Hostfile), which
	// the pod's container reads at HostfilePath.
	AnnotationHostfile = "gpuportal.io/hostfile"
	// HostfilePath is where a gang's container finds its hostfile
	// (GPUPORTAL_HOSTFILE), from the pod's annotation.
	HostfilePath = "/etc/gpuportal/hostfile"
	// AnnotationSimDuration is how long a simulated job (no command)
	// runs, as a Go duration ("90.000s"): its container sleeps that long,
	// and a KWOK stage may end the pod after it
	// (integration/testdata/kube/kwok.yaml).
	AnnotationSimDuration = "gpuportal.io/sim-duration"
	// Gate holds a pod until gpuportal has chosen its node and GPUs.
	Gate = "gpuportal.io/placement"
	// ResourceGPU is the extended resource of NVIDIA's device plugin.
	ResourceGPU corev1.ResourceName = "nvidia.com/gpu"
	// containerName is the one container of a run's pod.
	containerName = "job"
)

// podName is the name of the pod of run run of job jobID on node: one
// per run and node, so that a run is created at most once.
func podName(prefix string, jobID, run int64, node string) string {
	name := fmt.Sprintf("%s-%d-%d-%s", prefix, jobID, run, node)
	if len(name) > 253 {
		name = strings.TrimRight(name[:253], "-.")
	}
	return name
}

// labelValue makes s a valid label value: at most 63 letters, digits,
// '-', '_' or '.', beginning and ending with a letter or digit.
func labelValue(s string) string {
	v := invalidLabel.ReplaceAllString(s, "_")
	if len(v) > 63 {
		v = v[:63]
	}
	return strings.Trim(v, "-_.")
}

var invalidLabel = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// podSpec is what a pod of a run is made of besides its spec: the
// executor's settings.
type podSpec struct {
	prefix, namespace, image, node, team string
	grace                                time.Duration
	env                                  []string // NAME=value, gpuportal's and the job's
	// checkpointClaim, when set, is mounted at CheckpointMount: the
	// job's folder of it (checkpointSubPath).
	checkpointClaim string
	// uid and gid are the container's user and group; 0: DefaultRunAs.
	uid, gid int64
}

// newPod is the gated pod of run s on node p.node: labelled with its job,
// run and team, its GPUs pinned through NVIDIA_VISIBLE_DEVICES, and
// asking for no nvidia.com/gpu (the device plugin would choose GPUs of
// its own).
func newPod(p podSpec, s job.Spec, gpus []int) *corev1.Pod {
	command := s.Command
	annotations := map[string]string{AnnotationGPUs: joinInts(gpus), AnnotationNode: p.node, AnnotationParts: "1"}
	var ports []corev1.ContainerPort
	var sessionEnv []string
	if s.Session != nil {
		// start checked it: a session never gets here otherwise.
		cmd, senv, port, _ := sessionPod(s)
		if cmd != nil {
			command = cmd
		}
		sessionEnv = senv
		annotations[AnnotationSessionPort] = strconv.Itoa(port)
		ports = []corev1.ContainerPort{{Name: "session", ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}}
	} else if len(command) == 0 {
		secs := strconv.FormatFloat(max(s.SimRemaining.Seconds(), 0), 'f', 3, 64)
		command = []string{"sleep", secs}
		annotations[AnnotationSimDuration] = secs + "s"
	}
	image := s.Image
	if image == "" {
		image = p.image
	}
	env := make([]corev1.EnvVar, 0, len(p.env)+len(sessionEnv)+1)
	home := false
	for _, kv := range append(slices.Clone(p.env), sessionEnv...) {
		name, value, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: name, Value: value})
		home = home || name == "HOME"
	}
	if !home {
		// The image's user's home is not the container's user's, who
		// may have none (no /etc/passwd line): Jupyter, pip and the
		// frameworks' caches write there.
		env = append(env, corev1.EnvVar{Name: "HOME", Value: "/tmp"})
	}
	uid, gid := cmp.Or(p.uid, DefaultRunAs), cmp.Or(p.gid, DefaultRunAs)
	grace := int64(p.grace.Seconds())
	c := corev1.Container{Name: containerName, Image: image, Command: command, Env: env, Ports: ports,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		// Kubernetes' restricted Pod Security Standard: no way to gain
		// privileges, no capabilities.
		SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: new(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}
	if s.Dir != "" && strings.HasPrefix(s.Dir, "/") {
		c.WorkingDir = s.Dir
	}
	if r := s.Resources; r != nil && (r.CPUMilli > 0 || r.MemMiB > 0) {
		c.Resources.Requests = corev1.ResourceList{}
		if r.CPUMilli > 0 {
			c.Resources.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(r.CPUMilli, resource.DecimalSI)
		}
		if r.MemMiB > 0 {
			c.Resources.Requests[corev1.ResourceMemory] = *resource.NewQuantity(r.MemMiB<<20, resource.BinarySI)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: podName(p.prefix, s.JobID, s.Run, p.node), Namespace: p.namespace,
			Labels: map[string]string{
				LabelManagedBy: managedBy, LabelInstance: p.prefix,
				LabelJob: strconv.FormatInt(s.JobID, 10), LabelRun: strconv.FormatInt(s.Run, 10),
			},
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			// A job's code gets no credentials to the API server.
			AutomountServiceAccountToken: new(false),
			// Never root, whatever the image says: the kubelet refuses a
			// container that would run as UID 0.
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: new(true), RunAsUser: &uid, RunAsGroup: &gid,
				FSGroup: &gid, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			SchedulingGates:               []corev1.PodSchedulingGate{{Name: Gate}},
			TerminationGracePeriodSeconds: &grace,
			Containers:                    []corev1.Container{c},
			// GPU nodes are often tainted for GPU pods only.
			Tolerations: []corev1.Toleration{{Key: string(ResourceGPU), Operator: corev1.TolerationOpExists}},
		},
	}
	if p.team != "" {
		pod.Labels[LabelTeam] = labelValue(p.team)
	}
	if g := gangAddrs(s, p.prefix, p.namespace); g != nil {
		// A gang's pods reach one another by name: PREFIX-JOB-RUN-rRANK
		// in the headless Service PREFIX of the namespace.
		pod.Spec.Hostname, pod.Spec.Subdomain = gangHost(p.prefix, s.JobID, s.Run, g.Rank), p.prefix
		annotations[AnnotationParts] = strconv.Itoa(len(g.Nodes))
		annotations[AnnotationHostfile] = g.Hostfile()
		annotations[AnnotationRank] = strconv.Itoa(g.Rank)
		dir, file := path.Split(HostfilePath)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "gpuportal-gang", VolumeSource: corev1.VolumeSource{
			DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{Path: file,
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + AnnotationHostfile + "']"}}}}}})
		c := &pod.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "gpuportal-gang", MountPath: strings.TrimSuffix(dir, "/"), ReadOnly: true})
	}
	if p.checkpointClaim != "" {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "gpuportal-checkpoint", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.checkpointClaim}}})
		c := &pod.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "gpuportal-checkpoint", MountPath: CheckpointMount,
			SubPath: checkpointSubPath(s.JobID)})
	}
	if s.TimeLeft > 0 {
		// The kubelet ends it a margin after the engine would have.
		d := int64((s.TimeLeft + job.BackstopMargin).Seconds())
		pod.Spec.ActiveDeadlineSeconds = &d
	}
	return pod
}

// gangHost is the host name of the pod of rank rank of run run of job
// jobID: a DNS label, whatever its node's name.
func gangHost(prefix string, jobID, run int64, rank int) string {
	return fmt.Sprintf("%s-%d-%d-r%d", prefix, jobID, run, rank)
}

// gangAddrs is s's gang with each machine's address the DNS name of its
// pod (gangHost in the headless Service PREFIX of namespace), which
// MASTER_ADDR and the hostfile name; nil when s is not a gang.
func gangAddrs(s job.Spec, prefix, namespace string) *job.Gang {
	if s.Gang == nil {
		return nil
	}
	g := *s.Gang
	g.Nodes = slices.Clone(g.Nodes)
	for i := range g.Nodes {
		g.Nodes[i].Addr = fmt.Sprintf("%s.%s.%s.svc", gangHost(prefix, s.JobID, s.Run, i), prefix, namespace)
	}
	return &g
}

// pinAffinity is the node affinity that binds a gated pod to node: the
// one node whose name it is.
func pinAffinity(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}},
			}}},
		},
	}}
}

// gated reports whether pod still waits for gpuportal's gate.
func gated(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == Gate {
			return true
		}
	}
	return false
}

// terminal reports whether pod has ended: its containers are gone.
func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// ending is how a run's pod ended, in the engine's terms.
type ending struct {
	code    int
	why     string
	infra   bool
	endedAs job.State
}

// podEnding is how pod, which has ended (terminal), ended: its
// container's exit code, or why it did not simply exit, in plain words.
func podEnding(pod *corev1.Pod) ending {
	st := containerState(pod)
	switch pod.Status.Reason {
	case "Evicted":
		return ending{code: -1, why: "evicted by Kubernetes" + says(pod.Status.Message), infra: true}
	case "DeadlineExceeded":
		return ending{code: -1, why: "the time limit was reached (Kubernetes' active deadline)", endedAs: job.TimedOut}
	case "OutOfcpu", "OutOfmemory", "OutOfpods", "NodeAffinity", "UnexpectedAdmissionError", "NodeLost", "Shutdown", "Terminated":
		return ending{code: -1, why: "the node refused or lost it (" + pod.Status.Reason + ")" + says(pod.Status.Message), infra: true}
	}
	if st == nil || st.Terminated == nil {
		if pod.Status.Phase == corev1.PodSucceeded {
			return ending{}
		}
		why := "the pod failed"
		if pod.Status.Reason != "" {
			why += " (" + pod.Status.Reason + ")"
		}
		return ending{code: -1, why: why + says(pod.Status.Message)}
	}
	t := st.Terminated
	switch {
	case t.Reason == "OOMKilled":
		return ending{code: -1, why: fmt.Sprintf("out of memory: Kubernetes killed the container (OOMKilled, exit code %d)", t.ExitCode)}
	case t.Signal != 0:
		return ending{code: -1, why: job.KilledBy(syscall.Signal(t.Signal))}
	case t.ExitCode > 128 && t.Reason != "Completed" && t.Reason != "Error":
		return ending{code: -1, why: fmt.Sprintf("ended with exit code %d (%s)", t.ExitCode, t.Reason)}
	}
	return ending{code: int(t.ExitCode)}
}

// stuck says why pod, not ended, will never run: its image cannot be
// pulled, its container cannot be made; empty when it may yet run.
func stuck(pod *corev1.Pod) string {
	st := containerState(pod)
	if st == nil || st.Waiting == nil {
		return ""
	}
	w := st.Waiting
	switch w.Reason {
	case "ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "InvalidImageName":
		image := ""
		if len(pod.Spec.Containers) > 0 {
			image = " " + pod.Spec.Containers[0].Image
		}
		return "the image" + image + " could not be pulled (" + w.Reason + ")" + says(w.Message)
	case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
		return "the container could not be created (" + w.Reason + ")" + says(w.Message)
	}
	return ""
}

// containerState is the state of the run's container, nil when the
// kubelet has not reported it.
func containerState(pod *corev1.Pod) *corev1.ContainerState {
	for i := range pod.Status.ContainerStatuses {
		if cs := &pod.Status.ContainerStatuses[i]; cs.Name == containerName || len(pod.Status.ContainerStatuses) == 1 {
			return &cs.State
		}
	}
	return nil
}

func says(msg string) string {
	msg = strings.TrimSpace(msg)
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// gpuRequest is how many nvidia.com/gpu pod asks for: its containers'
// together, or an init container's if more.
func gpuRequest(pod *corev1.Pod) int64 {
	var sum, initMax int64
	for _, c := range pod.Spec.Containers {
		sum += quantity(c.Resources, ResourceGPU)
	}
	for _, c := range pod.Spec.InitContainers {
		initMax = max(initMax, quantity(c.Resources, ResourceGPU))
	}
	return max(sum, initMax)
}

func quantity(r corev1.ResourceRequirements, name corev1.ResourceName) int64 {
	if q, ok := r.Limits[name]; ok {
		return q.Value()
	}
	if q, ok := r.Requests[name]; ok {
		return q.Value()
	}
	return 0
}

// parseIndexList reads "0,3" into [0 3].
func parseIndexList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		i, err := strconv.Atoi(part)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("GPU index %q", part)
		}
		out = append(out, i)
	}
	return out, nil
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
