//go:build kube

package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubernetesCheckpoint: with --kube-checkpoint-claim, a job's pod
// mounts its folder of the claim at GPUPORTAL_CHECKPOINT_DIR, which the
// server made (mode 0777) in its own mount of the volume
// (--kube-checkpoint-dir). The test writes a checkpoint there as the job
// would through its mount (KWOK runs no containers), then the kubelet
// evicts the pod (its status written as a kubelet writes it): the job is
// requeued, and its next run's pod mounts the same folder with
// GPUPORTAL_RESUME=1 and GPUPORTAL_RESUME_RUN=1, and the API says run 2
// resumed from run 1's checkpoint. The pods the API server accepted run
// as --kube-run-as, never root, under the restricted Pod Security
// Standard's settings.
func TestKubernetesCheckpoint(t *testing.T) {
	c := startKube(t, 1, 2)
	ckDir := t.TempDir()
	srv := startKubeServer(t, c, t.TempDir(), "--kube-checkpoint-claim", "checkpoints", "--kube-checkpoint-dir", ckDir,
		"--kube-run-as", "2001:3001")
	waitGPUs(t, srv.URL, 2)
	alice := newAPI(t, srv.URL, "alice", "dev")
	ctx := context.Background()
	pods := c.core.Pods(kubeNamespace)
	id := submit(t, alice, map[string]any{"name": "train", "gpus": 1, "retries": 0,
		"command": []string{"python", "train.py", "--epochs", "90"}})
	runningPod := func(run int) *corev1.Pod {
		t.Helper()
		var pod *corev1.Pod
		eventually(t, 60*time.Second, fmt.Sprintf("the pod of run %d to run", run), func() bool {
			l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: fmt.Sprintf("gpuportal.io/job=%d,gpuportal.io/run=%d", id, run)})
			if err != nil || len(l.Items) != 1 || l.Items[0].Status.Phase != corev1.PodRunning {
				return false
			}
			pod = &l.Items[0]
			return true
		})
		return pod
	}
	folderOf := func(p *corev1.Pod) (claim, subPath string, env map[string]string) {
		env = make(map[string]string)
		for _, e := range p.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			for _, m := range p.Spec.Containers[0].VolumeMounts {
				if m.Name == v.Name && m.MountPath == env["GPUPORTAL_CHECKPOINT_DIR"] {
					return v.PersistentVolumeClaim.ClaimName, m.SubPath, env
				}
			}
		}
		return "", "", env
	}

	first := runningPod(1)
	claim, sub, env := folderOf(first)
	want := "job-" + strconv.FormatInt(id, 10)
	if claim != "checkpoints" || sub != want || env["GPUPORTAL_CHECKPOINT_DIR"] == "" {
		t.Fatalf("run 1's pod mounts claim %q folder %q at GPUPORTAL_CHECKPOINT_DIR=%q; want the claim's %s",
			claim, sub, env["GPUPORTAL_CHECKPOINT_DIR"], want)
	}
	if sc := first.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.RunAsUser == nil || *sc.RunAsUser != 2001 || sc.RunAsGroup == nil || *sc.RunAsGroup != 3001 {
		t.Errorf("run 1's pod security %+v; want non-root, UID 2001, GID 3001 (--kube-run-as)", sc)
	}
	if cs := first.Spec.Containers[0].SecurityContext; cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation ||
		cs.Capabilities == nil || len(cs.Capabilities.Drop) != 1 || cs.Capabilities.Drop[0] != "ALL" {
		t.Errorf("run 1's container security %+v; want no privilege escalation, every capability dropped", cs)
	}
	if env["GPUPORTAL_RESUME"] != "" {
		t.Errorf("run 1 is told it resumes (GPUPORTAL_RESUME=%q) from an empty folder", env["GPUPORTAL_RESUME"])
	}
	folder := filepath.Join(ckDir, want)
	st, err := os.Stat(folder)
	if err != nil || st.Mode().Perm() != 0o777 {
		t.Fatalf("the job's folder in the server's mount: %v, %v; want it made, mode 0777", st, err)
	}
	// Run 1 saves a checkpoint, as the job would through its mount.
	if err := os.WriteFile(filepath.Join(folder, "epoch-12.pt"), []byte("weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The kubelet evicts the pod: the job goes back to the queue, not
	// failed (an infrastructure fault).
	first.Status.Phase = corev1.PodFailed
	first.Status.Reason, first.Status.Message = "Evicted", "The node was low on resource: memory."
	if _, err := pods.UpdateStatus(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	second := runningPod(2)
	claim, sub, env = folderOf(second)
	if claim != "checkpoints" || sub != want {
		t.Errorf("run 2's pod mounts claim %q folder %q; want run 1's, the claim's %s", claim, sub, want)
	}
	if env["GPUPORTAL_RESUME"] != "1" || env["GPUPORTAL_RESUME_RUN"] != "1" || env["GPUPORTAL_CHECKPOINT_AT"] == "" {
		t.Errorf("run 2's variables GPUPORTAL_RESUME=%q GPUPORTAL_RESUME_RUN=%q GPUPORTAL_CHECKPOINT_AT=%q; want it told it resumes from run 1's checkpoint",
			env["GPUPORTAL_RESUME"], env["GPUPORTAL_RESUME_RUN"], env["GPUPORTAL_CHECKPOINT_AT"])
	}
	var page struct {
		State  string `json:"state"`
		Resume *struct {
			Run          int64      `json:"run"`
			FromRun      int64      `json:"from_run"`
			CheckpointAt *time.Time `json:"checkpoint_at"`
		} `json:"resume"`
	}
	eventually(t, 30*time.Second, "the job's page to say run 2 resumed", func() bool {
		if st := alice.do(http.MethodGet, fmt.Sprintf("/api/v1/jobs/%d", id), nil, &page); st != http.StatusOK {
			t.Fatalf("GET job: %d", st)
		}
		return page.Resume != nil
	})
	if r := page.Resume; r.Run != 2 || r.FromRun != 1 || r.CheckpointAt == nil || page.State != "running" {
		t.Errorf("the job is %s, its resume %+v; want run 2 running, resumed from run 1's checkpoint", page.State, *r)
	} else {
		t.Logf("evicted, requeued, and run 2 resumed from run 1's checkpoint of %s", r.CheckpointAt.Format(time.RFC3339Nano))
	}
	alice.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", id), nil, nil)
}
