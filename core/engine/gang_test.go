package engine

import (
	"context"
	"testing"

	"github.com/gpuportal/gpuportal/core/job"
)

// addrNode is a fakeNode whose agent reported an address.
type addrNode struct {
	*fakeNode
	addr string
}

func (n addrNode) Addr() string { return n.addr }

func TestGangRendezvousPerPart(t *testing.T) {
	ctx := context.Background()
	store := newMemStore(
		Job{ID: 1, GPUs: 4, Name: "bert", Command: []string{"torchrun"}, SubmittedAt: t0},
		Job{ID: 2, GPUs: 4, Command: []string{"torchrun"}, TasksPerGPU: true, SubmittedAt: t0.Add(1)},
		Job{ID: 3, GPUs: 1, Command: []string{"train"}, SubmittedAt: t0.Add(2)},
	)
	a, b, c, d, s := newFakeNode("a", 2), newFakeNode("b", 2), newFakeNode("c", 2), newFakeNode("d", 2), newFakeNode("s", 1)
	e, clock := newTestEngine(t, store, a, b, c, d, s)
	e.nodes["a"] = addrNode{a, "10.0.0.1"} // c, d, s: in process, 127.0.0.1
	e.nodes["b"] = addrNode{b, "10.0.0.2"}
	mustPass(t, e)
	for _, n := range []*fakeNode{a, b, c, d, s} {
		if len(n.starts) != 1 {
			t.Fatalf("%s started %d parts, want 1", n.name, len(n.starts))
		}
	}
	if g := s.starts[0].Gang; g != nil {
		t.Errorf("a job on one machine as one process got a gang: %+v", g)
	}
	byJob := map[int64][]job.Spec{}
	for _, n := range []*fakeNode{a, b, c, d} {
		byJob[n.starts[0].JobID] = append(byJob[n.starts[0].JobID], n.starts[0])
	}
	ports := map[int64]int{}
	for id, specs := range byJob {
		if len(specs) != 2 {
			t.Fatalf("job %d: %d parts, want 2", id, len(specs))
		}
		ranks := map[int]bool{}
		for _, sp := range specs {
			g := sp.Gang
			if g == nil || g.Check() != nil || len(g.Nodes) != 2 || g.WorldSize() != 4 {
				t.Fatalf("job %d part on %v: gang %+v", id, sp.GPUs, g)
			}
			if g.Nodes[g.Rank].GPUs != len(sp.GPUs) {
				t.Errorf("job %d rank %d: %d GPUs in the gang, %d started", id, g.Rank, g.Nodes[g.Rank].GPUs, len(sp.GPUs))
			}
			if g.TasksPerGPU != (id == 2) {
				t.Errorf("job %d: TasksPerGPU %v", id, g.TasksPerGPU)
			}
			ranks[g.Rank] = true
			ports[id] = g.MasterPort
		}
		if !ranks[0] || !ranks[1] {
			t.Errorf("job %d: ranks %v, want 0 and 1", id, ranks)
		}
	}
	if byJob[1][0].Name != "bert" {
		t.Errorf("job 1's name %q, want bert", byJob[1][0].Name)
	}
	addrs := map[string]string{"a": "10.0.0.1", "b": "10.0.0.2", "c": "127.0.0.1", "d": "127.0.0.1"}
	for id, specs := range byJob {
		for _, n := range specs[0].Gang.Nodes {
			if n.Addr != addrs[n.Name] {
				t.Errorf("job %d: %s at %q, want %q", id, n.Name, n.Addr, addrs[n.Name])
			}
		}
	}
	if ports[1] != DefaultMasterPorts.From || ports[2] != DefaultMasterPorts.From {
		t.Errorf("ports %v: each first machine's lowest, %d", ports, DefaultMasterPorts.From)
	}

	// A second run on the same first machine while the first runs gets
	// another port; once the first has ended, its port is free again.
	r1 := e.runs[1]
	g := e.gang(Job{ID: 4}, &run{}, []string{r1.master, "z"}, map[string][]int{r1.master: {0}, "z": {0}})
	if g.MasterPort != DefaultMasterPorts.From+1 {
		t.Errorf("a second run on %s got port %d, want %d", r1.master, g.MasterPort, DefaultMasterPorts.From+1)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		e.testExit(ctx, exit(n, e.nodeJob(n), 0, clock.t))
	}
	g = e.gang(Job{ID: 4}, &run{}, []string{r1.master, "z"}, map[string][]int{r1.master: {0}, "z": {0}})
	if g.MasterPort != DefaultMasterPorts.From {
		t.Errorf("after the runs ended: port %d, want %d", g.MasterPort, DefaultMasterPorts.From)
	}
}

// nodeJob is the job whose part the test started on node.
func (e *Engine) nodeJob(node string) int64 {
	for id, r := range e.runs {
		if r.parts[node] {
			return id
		}
	}
	return 0
}

func TestParsePortRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want PortRange
		ok   bool
	}{
		{"29500-29999", PortRange{29500, 500}, true},
		{"40000-40000", PortRange{40000, 1}, true},
		{"80-90", PortRange{}, false},
		{"3000-2000", PortRange{}, false},
		{"29500", PortRange{}, false},
		{"29500-70000", PortRange{}, false},
		{"29500-29999x", PortRange{}, false},
	} {
		got, err := ParsePortRange(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParsePortRange(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
