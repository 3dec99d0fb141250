package trace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
)

// Node is one machine of a simulated cluster.
type Node struct {
	Name string
	GPUs int
	// GPUMemMiB is the memory of each GPU; 0 when unknown.
	GPUMemMiB int64
	CPUMilli  int64
	MemMiB    int64
	// Model is the GPU model, "" when unknown.
	Model string
}

// clusterSpec matches NODESxGPUS or NODESxGPUSxGPU_MEM_GB.
var clusterSpec = regexp.MustCompile(`^(\d+)x(\d+)(?:x(\d+))?$`)

// Limits on a cluster spec, to refuse typos such as 40000x8.
const (
	maxNodes       = 1 << 20
	maxGPUsPerNode = 1024
)

// ParseClusterSpec parses NODESxGPUS or NODESxGPUSxGPU_MEM_GB, such as
// "4x8" or "4x8x32": that many identical nodes, named node-0, node-1, ...
func ParseClusterSpec(spec string) ([]Node, error) {
	m := clusterSpec.FindStringSubmatch(spec)
	if m == nil {
		return nil, fmt.Errorf("cluster %q: want NODESxGPUS or NODESxGPUSxGPU_MEM_GB, such as 4x8 or 4x8x32", spec)
	}
	nodes, err1 := strconv.Atoi(m[1])
	gpus, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil || nodes < 1 || nodes > maxNodes || gpus < 1 || gpus > maxGPUsPerNode {
		return nil, fmt.Errorf("cluster %q: want 1 to %d nodes of 1 to %d GPUs", spec, maxNodes, maxGPUsPerNode)
	}
	var memMiB int64
	if m[3] != "" {
		gb, err := strconv.Atoi(m[3])
		if err != nil || gb < 1 || gb > 1<<20 {
			return nil, fmt.Errorf("cluster %q: GPU memory %q GB out of range", spec, m[3])
		}
		memMiB = int64(gb) * 1024
	}
	out := make([]Node, nodes)
	for i := range out {
		out[i] = Node{Name: fmt.Sprintf("node-%d", i), GPUs: gpus, GPUMemMiB: memMiB}
	}
	return out, nil
}

// LoadCluster reads --cluster's value: a spec such as 4x8 (see
// ParseClusterSpec), or else the name of a node file (see ReadNodes).
func LoadCluster(arg string) ([]Node, error) {
	if clusterSpec.MatchString(arg) {
		return ParseClusterSpec(arg)
	}
	f, err := os.Open(arg)
	if err != nil {
		return nil, fmt.Errorf("cluster %q is neither NODESxGPUS[xGPU_MEM_GB] nor a readable node file: %w", arg, err)
	}
	defer f.Close()
	return ReadNodes(f, arg)
}

// nodeColumns are the columns a node file may have; gpu is required.
var nodeColumns = []string{"sn", "name", "gpu", "gpu_mem_mib", "cpu_milli", "memory_mib", "model"}

// gpuMemByModel gives the memory of the GPU models of the openb cluster
// whose memory is public; other models read as unknown (0).
var gpuMemByModel = map[string]int64{
	"P100":    16 * 1024,
	"T4":      16 * 1024,
	"V100M16": 16 * 1024,
	"V100M32": 32 * 1024,
	"A10":     24 * 1024,
}

// ReadNodes parses a node file in the layout of the openb cluster's
// openb-gpu-nodes.csv: sn,cpu_milli,memory_mib,gpu,model. Only gpu, the
// GPU count, is required; the name column may be called sn or name
// (absent: node-<line>), and gpu_mem_mib, when present, overrides the
// memory known for the model.
func ReadNodes(r io.Reader, name string) ([]Node, error) {
	t, err := openTable(r, name)
	if err != nil {
		return nil, err
	}
	if err := t.require("gpu"); err != nil {
		return nil, err
	}
	if err := t.only(nodeColumns); err != nil {
		return nil, err
	}
	var out []Node
	seen := map[string]int{}
	err = t.each(func(row row) error {
		n, err := nodeOf(row)
		if err != nil {
			return err
		}
		if first, dup := seen[n.Name]; dup {
			return row.errorf("", "node %q already named on line %d", n.Name, first)
		}
		seen[n.Name] = row.line
		out = append(out, n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, &ParseError{File: name, Err: errors.New("no nodes")}
	}
	return out, nil
}

func nodeOf(row row) (Node, error) {
	n := Node{Name: row.str("sn"), Model: row.str("model")}
	if n.Name == "" {
		n.Name = row.str("name")
	}
	if n.Name == "" {
		n.Name = fmt.Sprintf("node-%d", row.line)
	}
	g, err := row.intIn("gpu", 0, maxGPUsPerNode)
	if err != nil {
		return n, err
	}
	n.GPUs = int(g)
	if n.CPUMilli, err = row.optIntIn("cpu_milli", 0, 0, 1<<40); err != nil {
		return n, err
	}
	if n.MemMiB, err = row.optIntIn("memory_mib", 0, 0, 1<<40); err != nil {
		return n, err
	}
	if n.GPUMemMiB, err = row.optIntIn("gpu_mem_mib", gpuMemByModel[n.Model], 0, 1<<40); err != nil {
		return n, err
	}
	return n, nil
}
