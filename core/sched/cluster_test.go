package sched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// TestPassesKeepNothingThatChangesDecisions schedules snapshots that
// differ in what a pass keeps for the next (the node names, their order
// and where their bytes are, GPU lists numbered otherwise or naming an
// index twice, unschedulable nodes, model names) one after another with one
// scheduler, and requires of each the decisions a fresh scheduler makes.
func TestPassesKeepNothingThatChangesDecisions(t *testing.T) {
	node := func(name string, idx ...int) Node {
		n := Node{Name: name}
		for _, i := range idx {
			n.GPUs = append(n.GPUs, GPU{Index: i, MemMiB: 16384})
		}
		return n
	}
	dense := func(name string) Node { return node(name, 0, 1, 2, 3) }
	on := func(name string, idx ...int) []gpu.Ref {
		var out []gpu.Ref
		for _, i := range idx {
			// A copy of the name: not the node's own bytes.
			out = append(out, gpu.Ref{Node: strings.Clone(name), Index: i})
		}
		return out
	}
	jobs := func(a, b, c string) []Job {
		return []Job{
			{ID: 1, GPUs: 2, State: Running, Placement: on(a, 0, 1), SubmitTime: 1, AttainedService: 9000, ExecutedS: 4500, Model: "vgg16"},
			{ID: 2, GPUs: 1, State: Running, Placement: on(b, 3), SubmitTime: 2, AttainedService: 10, ExecutedS: 10, Model: "ResNet-50"},
			{ID: 3, GPUs: 2, State: Running, Placement: on(c, 1, 2), SubmitTime: 3, AttainedService: 100, ExecutedS: 50},
			{ID: 4, GPUs: 4, State: Pending, SubmitTime: 4, Model: "vgg16"},
			{ID: 5, GPUs: 3, State: Pending, SubmitTime: 5, Model: "bert_large"},
			{ID: 6, GPUs: 1, State: Pending, SubmitTime: 6, Model: "resnet50"},
			{ID: 7, GPUs: 8, State: Pending, SubmitTime: 7},
		}
	}
	a := Snapshot{Now: 100, Nodes: []Node{dense("n0"), dense("n1"), dense("n2")}, Jobs: jobs("n0", "n1", "n2")}
	// The same names, the second node numbered otherwise and naming GPU 1
	// twice, the third unschedulable.
	b := Snapshot{Now: 100, Nodes: []Node{dense("n0"), node("n1", 3, 1, 1, 0), dense("n2")}, Jobs: jobs("n0", "n1", "n2")}
	b.Nodes[2].Unschedulable = true
	// The names in another order, one of them new and one twice.
	c := Snapshot{Now: 100, Nodes: []Node{dense("n2"), dense("x"), dense("n0"), dense("n2")}, Jobs: jobs("x", "n0", "n2")}
	// As many nodes as a, two of them swapped, the first with 2 GPUs.
	e := Snapshot{Now: 100, Nodes: []Node{node("n1", 0, 1), dense("n0"), dense("n2")}, Jobs: jobs("n0", "n1", "n2")}
	e.Jobs[1].Placement = on("n1", 1)
	// The nodes' own name strings in the placements.
	d := Snapshot{Now: 100, Nodes: []Node{dense("n0"), dense("n1"), dense("n2")}}
	d.Jobs = jobs("n0", "n1", "n2")
	for i := range d.Jobs {
		for k := range d.Jobs[i].Placement {
			g := &d.Jobs[i].Placement[k]
			for _, n := range d.Nodes {
				if n.Name == g.Node {
					g.Node = n.Name
				}
			}
		}
	}
	for _, policy := range Policies() {
		for _, placement := range []string{PlaceNodes, PlaceCount} {
			cfg := Config{Policy: policy, Placement: placement}
			sc, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for k, s := range []Snapshot{a, b, c, d, e, a, e, c, b, d, c, a} {
				fresh, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				want := fmt.Sprintf("%+v", fresh.Schedule(s))
				if got := fmt.Sprintf("%+v", sc.Schedule(s)); got != want {
					t.Errorf("%s, %s, snapshot %d: after other snapshots\n%s\nwant, as a fresh scheduler decides,\n%s", policy, placement, k, got, want)
				}
			}
		}
	}
}
