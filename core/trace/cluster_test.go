package trace

import (
	"strings"
	"testing"
)

func TestParseClusterSpec(t *testing.T) {
	cases := []struct {
		spec    string
		nodes   int
		gpus    int
		memMiB  int64
		wantErr string
	}{
		{spec: "3x8", nodes: 3, gpus: 8},
		{spec: "256x8x32", nodes: 256, gpus: 8, memMiB: 32 * 1024},
		{spec: "0x8", wantErr: "want 1 to"},
		{spec: "4x0", wantErr: "want 1 to"},
		{spec: "4*8", wantErr: "want NODESxGPUS"},
		{spec: "4x8x", wantErr: "want NODESxGPUS"},
		{spec: "99999999999999999999x8", wantErr: "want 1 to"},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			nodes, err := ParseClusterSpec(c.spec)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes) != c.nodes || nodes[0].GPUs != c.gpus || nodes[0].GPUMemMiB != c.memMiB {
				t.Fatalf("got %d nodes, first %+v", len(nodes), nodes[0])
			}
			if nodes[1].Name == nodes[0].Name {
				t.Fatalf("nodes share the name %q", nodes[0].Name)
			}
		})
	}
}

func TestReadNodes(t *testing.T) {
	in := "sn,cpu_milli,memory_mib,gpu,model\n" +
		"a,64000,262144,2,P100\n" +
		"b,96000,393216,8,G2\n" +
		"c,96000,393216,8,V100M32\n"
	nodes, err := ReadNodes(strings.NewReader(in), "nodes.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{
		{Name: "a", GPUs: 2, GPUMemMiB: 16384, CPUMilli: 64000, MemMiB: 262144, Model: "P100"},
		{Name: "b", GPUs: 8, CPUMilli: 96000, MemMiB: 393216, Model: "G2"},
		{Name: "c", GPUs: 8, GPUMemMiB: 32768, CPUMilli: 96000, MemMiB: 393216, Model: "V100M32"},
	}
	for i := range want {
		if nodes[i] != want[i] {
			t.Errorf("node %d = %+v, want %+v", i, nodes[i], want[i])
		}
	}
}

func TestReadNodesBad(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"no gpu column", "sn,model\na,T4\n", "nodes.csv:1: header lacks column(s) gpu"},
		{"duplicate node", "sn,gpu\na,1\na,2\n", `nodes.csv:3: node "a" already named on line 2`},
		{"negative GPUs", "sn,gpu\na,-1\n", "nodes.csv:2: column gpu: -1 is out of range"},
		{"unknown column", "sn,gpu,gpus\na,1,1\n", "column gpus: unknown column"},
		{"no nodes", "sn,gpu\n", "nodes.csv: no nodes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadNodes(strings.NewReader(c.in), "nodes.csv")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

func TestLoadClusterFile(t *testing.T) {
	nodes, err := LoadCluster(sharedFile(t, "openb-gpu-nodes.csv"))
	if err != nil {
		t.Fatal(err)
	}
	gpus := 0
	for _, n := range nodes {
		gpus += n.GPUs
	}
	if len(nodes) != 1213 || gpus != 6212 {
		t.Fatalf("%d nodes with %d GPUs, want 1213 with 6212", len(nodes), gpus)
	}
}

func TestLoadClusterNeitherSpecNorFile(t *testing.T) {
	_, err := LoadCluster("4x8y")
	if err == nil || !strings.Contains(err.Error(), "neither NODESxGPUS") {
		t.Fatalf("error %v", err)
	}
}
