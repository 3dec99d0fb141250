//go:build kube

package integration

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubernetesGangAllOrNothing runs jobs of 16 machines (a gang of 16
// pods, 8 GPUs each) and crashes the API server at the worst moments:
// once when the first of a gang's pods has been created, once when the
// first has been bound. While it is away etcd is compacted, so every
// watch gpuportal had expires and must list again. The API server's own
// objects, watched throughout, show no pod of a gang Running while the
// pods of its other parts do not all exist, every run's pods Running
// all or none, and no GPU bound to two Running pods; each job succeeds.
func TestKubernetesGangAllOrNothing(t *testing.T) {
	const parts = 16
	c := startKube(t, parts, 8)
	g := c.watchGPUs(t)
	srv := startKubeServer(t, c, t.TempDir(), "--heartbeat-timeout", "5s")
	waitGPUs(t, srv.URL, parts*8)
	alice := newAPI(t, srv.URL, "alice", "dev")
	ctx := context.Background()

	for _, at := range []struct {
		what string
		ok   func(p *corev1.Pod) bool
	}{
		{"created", func(*corev1.Pod) bool { return true }},
		{"bound", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }},
	} {
		id := submit(t, alice, map[string]any{"name": "gang-" + at.what, "gpus": parts * 8, "sim": map[string]any{"duration_s": 30}})
		job := strconv.FormatInt(id, 10)
		g.waitFor(t, 60*time.Second, "the gang's first pod "+at.what, func() bool {
			for _, p := range g.pods {
				if p.Labels["gpuportal.io/job"] == job && at.ok(p) {
					return true
				}
			}
			return false
		})
		began := time.Now()
		g.mu.Lock()
		seen, bound := 0, 0
		for _, p := range g.pods {
			if p.Labels["gpuportal.io/job"] == job {
				seen++
				if p.Spec.NodeName != "" {
					bound++
				}
			}
		}
		g.mu.Unlock()
		c.restartAPIServer(func() {
			eventually(t, 30*time.Second, "gpuportal to lose the API server", func() bool {
				return strings.Contains(srv.output(), "watch failed; watching again")
			})
		})
		t.Logf("API server crashed when the gang's first pod was %s (%d of its pods seen, %d bound), back after %v",
			at.what, seen, bound, time.Since(began).Round(time.Millisecond))
		j := alice.waitState(id, 3*time.Minute, "succeeded", "failed", "cancelled")
		if j.State != "succeeded" {
			t.Errorf("gang job %d ended %s (%s), want succeeded", id, j.State, j.Reason)
		}
		// A pod whose create's answer the crash lost is gpuportal's
		// without a run: deleted once it is a minute old.
		eventually(t, 90*time.Second, "gpuportal's finished pods to be deleted", func() bool {
			l, err := c.core.Pods(kubeNamespace).List(ctx, metav1.ListOptions{})
			return err == nil && len(l.Items) == 0
		})
		// All or none, run by run: the pods of each run that ever ran.
		g.mu.Lock()
		ran := map[string]int{}
		for name := range g.everRan {
			if f := strings.Split(name, "-"); len(f) >= 4 && f[1] == job {
				ran[f[2]]++
			}
		}
		g.mu.Unlock()
		for run, n := range ran {
			if n != parts {
				t.Errorf("run %s of gang job %d: %d of its %d pods ran", run, id, n, parts)
			}
		}
		if len(ran) == 0 {
			t.Errorf("no pod of gang job %d ran", id)
		}
		t.Logf("gang job %d: runs that ran %v (16 pods each), %s", id, ran, j.State)
	}
	g.check(t)
	if !strings.Contains(srv.output(), "watch expired: listing again") {
		t.Error("gpuportal's watches did not expire across the API server's restarts: the relist is untested")
	}
	g.mu.Lock()
	relists := g.relists
	g.mu.Unlock()
	t.Logf("the test's own watch listed %d times", relists)
}

// TestKubernetesReclaim: team nlp borrows vision's guaranteed GPU; when
// vision submits, nlp's borrowed pod is deleted and vision's pod bound
// in its place. The time from vision's submission to its pod Running
// and the borrowed pod gone is measured from the API server's objects.
func TestKubernetesReclaim(t *testing.T) {
	c := startKube(t, 1, 2)
	g := c.watchGPUs(t)
	srv := startKubeServer(t, c, t.TempDir(), "--dev-token", "adm", "--min-runtime", "2s")
	waitGPUs(t, srv.URL, 2)
	admin := &api{t: t, base: srv.URL, token: "adm"}
	for _, team := range []string{"vision", "nlp"} {
		if st := admin.do(http.MethodPatch, "/api/v1/teams/"+team, map[string]any{"guaranteed_gpus": 1, "weight": 1}, nil); st != http.StatusOK {
			t.Fatalf("set the share of %s: %d", team, st)
		}
	}
	bob := newAPI(t, srv.URL, "bob", "dev")
	var nlp []int64
	for i := range 2 {
		nlp = append(nlp, submit(t, bob, map[string]any{"name": fmt.Sprint("nlp", i), "gpus": 1, "sim": map[string]any{"duration_s": 600}}))
	}
	g.waitFor(t, 60*time.Second, "nlp's two pods Running", func() bool { return g.now == 2 })
	// Past the minimum runtime, so that the reclaim does not wait for it.
	eventually(t, 30*time.Second, "nlp's jobs past their minimum runtime", func() bool {
		j := bob.job(nlp[0])
		return j.StartedAt != nil && time.Since(*j.StartedAt) > 3*time.Second
	})
	alice := newAPI(t, srv.URL, "alice", "dev")
	began := time.Now()
	mine := submit(t, alice, map[string]any{"name": "vision0", "gpus": 1, "sim": map[string]any{"duration_s": 600}})
	var gone, bound time.Duration
	g.waitFor(t, 60*time.Second, "vision's pod Running and one of nlp's gone", func() bool {
		visionRunning, nlpPods := false, 0
		for _, p := range g.pods {
			if p.Namespace != kubeNamespace {
				continue
			}
			switch p.Labels["gpuportal.io/team"] {
			case "vision":
				visionRunning = visionRunning || p.Status.Phase == corev1.PodRunning
			case "nlp":
				nlpPods++
			}
		}
		if nlpPods < 2 && gone == 0 {
			gone = time.Since(began)
		}
		if visionRunning && bound == 0 {
			bound = time.Since(began)
		}
		return gone != 0 && bound != 0
	})
	t.Logf("reclaim: the borrowed pod deleted %v and vision's pod Running %v after vision's submission",
		gone.Round(time.Millisecond), bound.Round(time.Millisecond))
	if j := alice.job(mine); j.State != "running" {
		t.Errorf("vision's job is %s, want running", j.State)
	}
	preempted := 0
	for _, id := range nlp {
		if j := bob.job(id); j.State == "preempted" || j.State == "queued" {
			preempted++
			if !strings.Contains(jobHistoryText(t, bob, id), "vision") {
				t.Errorf("nlp's job %d: its history names no reclaim for vision", id)
			}
		}
	}
	if preempted != 1 {
		t.Errorf("%d of nlp's jobs were reclaimed, want 1", preempted)
	}
	g.check(t)
}

// TestKubernetesStartOrder runs the same trace on the built-in agents
// (serve --sim-gpus) and on Kubernetes nodes of the same size: one core,
// two engines. Jobs of one user, of normal and low priority, are all
// submitted while every node is cordoned, then the nodes are uncordoned;
// each job's start (started_at, the engine's decision) orders them, and
// the two orders must be the same. Its size is kubeScale's: by default
// 40 jobs on 2 nodes (16 GPUs), so that most wait for others to end.
func TestKubernetesStartOrder(t *testing.T) {
	nodes, n := kubeScale(t, 2, 40)
	agents := startServer(t, "--data", t.TempDir(), "--sim-gpus", fmt.Sprintf("%dx8x80", nodes), "--dev-token", "adm")
	waitGPUs(t, agents.URL, nodes*8)
	onAgents := runOrderTrace(t, agents.URL, n)
	agents.stop()

	c := startKube(t, nodes, 8)
	srv := startKubeServer(t, c, t.TempDir(), "--dev-token", "adm")
	waitGPUs(t, srv.URL, nodes*8)
	onKube := runOrderTrace(t, srv.URL, n)
	if !slices.Equal(onAgents, onKube) {
		first := 0
		for first < len(onAgents) && onAgents[first] == onKube[first] {
			first++
		}
		t.Errorf("the start orders differ from the %dth start on:\nagents:     %v\nKubernetes: %v", first+1,
			onAgents[first:min(first+20, len(onAgents))], onKube[first:min(first+20, len(onKube))])
	}
	t.Logf("%d jobs on %d nodes x 8 GPUs: the same start order on the built-in agents and on Kubernetes", n, nodes)
}

// runOrderTrace submits the trace of TestKubernetesStartOrder to the
// server at base, waits until every job has succeeded, and returns the
// jobs' numbers in the trace (0 to n-1) in the order they started.
func runOrderTrace(t *testing.T, base string, n int) []int {
	t.Helper()
	admin := &api{t: t, base: base, token: "adm"}
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range nodes(t, admin) {
			if !yield(name) {
				return
			}
		}
	})
	for _, name := range names {
		if st := admin.do(http.MethodPost, "/api/v1/nodes/"+name+"/cordon", nil, nil); st != http.StatusOK {
			t.Fatalf("cordon %s: %d", name, st)
		}
	}
	alice := newAPI(t, base, "alice", "dev")
	began := time.Now()
	ids := make([]int64, n)
	for i := range n {
		prio := "normal"
		if i%3 == 1 {
			prio = "low"
		}
		ids[i] = submit(t, alice, map[string]any{"name": fmt.Sprint("o-", i), "gpus": 1, "priority": prio, "sim": map[string]any{"duration_s": 2 + i%3}})
	}
	for _, name := range names {
		if st := admin.do(http.MethodPost, "/api/v1/nodes/"+name+"/uncordon", nil, nil); st != http.StatusOK {
			t.Fatalf("uncordon %s: %d", name, st)
		}
	}
	type start struct {
		i    int
		at   time.Time
		prio int
	}
	starts := make([]start, n)
	for i, id := range ids {
		j := alice.waitState(id, time.Duration(120+n/2)*time.Second, "succeeded", "failed", "cancelled")
		if j.State != "succeeded" || j.StartedAt == nil {
			t.Fatalf("job %d ended %s (%s), want succeeded", id, j.State, j.Reason)
		}
		starts[i] = start{i: i, at: *j.StartedAt, prio: boolInt(i%3 == 1)}
	}
	t.Logf("%s: %d jobs done %v after the first submission", base, n, time.Since(began).Round(time.Millisecond))
	// Starts of one scheduling pass share their time: normal before low
	// within it, then the trace's order, as the queue has them.
	slices.SortFunc(starts, func(a, b start) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.prio, b.prio), cmp.Compare(a.i, b.i))
	})
	order := make([]int, n)
	for k, s := range starts {
		order[k] = s.i
	}
	return order
}
