package job

import (
	"slices"
	"testing"
)

func TestGangEnvAndHostfile(t *testing.T) {
	g := &Gang{Nodes: []GangNode{{Name: "n1", Addr: "10.0.0.1", GPUs: 2}, {Name: "n2", Addr: "10.0.0.2", GPUs: 4}, {Name: "n3", Addr: "h3", GPUs: 0}},
		Rank: 1, MasterPort: 29501}
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
	want := []string{"MASTER_ADDR=10.0.0.1", "MASTER_PORT=29501", "WORLD_SIZE=7", "NODE_RANK=1", "GROUP_RANK=1", "NNODES=3",
		"LOCAL_WORLD_SIZE=4", "GPUPORTAL_NODES=n1,n2,n3", "GPUPORTAL_HOSTFILE=/w/jobs/5/hostfile"}
	if got := g.Env("/w/jobs/5/hostfile"); !slices.Equal(got, want) {
		t.Errorf("Env:\n got %q\nwant %q", got, want)
	}
	if got, want := g.Hostfile(), "10.0.0.1 slots=2\n10.0.0.2 slots=4\nh3 slots=1\n"; got != want {
		t.Errorf("Hostfile %q, want %q", got, want)
	}
	if g.FirstRank() != 2 || g.Tasks() != 1 {
		t.Errorf("FirstRank %d Tasks %d, want 2 and 1", g.FirstRank(), g.Tasks())
	}
	g.TasksPerGPU = true
	if g.Tasks() != 4 {
		t.Errorf("Tasks per GPU: %d, want 4", g.Tasks())
	}
	var none *Gang
	if none.Tasks() != 1 {
		t.Error("no gang: want one task")
	}
}

func TestGangCheck(t *testing.T) {
	ok := GangNode{Name: "n1", Addr: "10.0.0.1", GPUs: 1}
	for name, g := range map[string]Gang{
		"no machines":          {MasterPort: 1},
		"rank outside":         {Nodes: []GangNode{ok}, Rank: 1, MasterPort: 29500},
		"no port":              {Nodes: []GangNode{ok}},
		"no address":           {Nodes: []GangNode{{Name: "n1"}}, MasterPort: 29500},
		"address with a space": {Nodes: []GangNode{{Name: "n1", Addr: "a b"}}, MasterPort: 29500},
	} {
		if err := g.Check(); err == nil {
			t.Errorf("%s: Check accepted %+v", name, g)
		}
	}
}

func TestSlurmEnv(t *testing.T) {
	get := func(env []string, name string) string {
		for _, kv := range env {
			if n, v, _ := cut(kv); n == name {
				return v
			}
		}
		return "<unset>"
	}
	one := SlurmEnv(12, "sweep[3]", 1, nil, &ArrayTask{ID: 9, Index: 3}, "n1")
	for name, want := range map[string]string{
		"SLURM_JOB_ID": "12", "SLURM_JOB_NAME": "sweep", "SLURM_JOB_NODELIST": "n1", "SLURM_NNODES": "1",
		"SLURM_NODEID": "0", "SLURM_NTASKS": "1", "SLURM_PROCID": "0", "SLURM_GPUS_ON_NODE": "1",
		"SLURM_ARRAY_JOB_ID": "9", "SLURM_ARRAY_TASK_ID": "3",
	} {
		if got := get(one, name); got != want {
			t.Errorf("one machine: %s=%s, want %s", name, got, want)
		}
	}
	g := &Gang{Nodes: []GangNode{{Name: "n1", Addr: "a", GPUs: 2}, {Name: "n2", Addr: "b", GPUs: 2}}, Rank: 1, MasterPort: 29500}
	two := SlurmEnv(13, "ddp", 2, g, nil, "n2")
	for name, want := range map[string]string{
		"SLURM_JOB_NODELIST": "n1,n2", "SLURM_NNODES": "2", "SLURM_NODEID": "1", "SLURM_NTASKS": "2",
		"SLURM_NTASKS_PER_NODE": "1", "SLURM_PROCID": "1", "SLURM_ARRAY_TASK_ID": "<unset>",
	} {
		if got := get(two, name); got != want {
			t.Errorf("two machines: %s=%s, want %s", name, got, want)
		}
	}
	g.TasksPerGPU = true
	tasks := SlurmEnv(13, "ddp", 2, g, nil, "n2")
	if get(tasks, "SLURM_NTASKS") != "4" || get(tasks, "SLURM_NTASKS_PER_NODE") != "2" || get(tasks, "SLURM_PROCID") != "<unset>" {
		t.Errorf("a task per GPU: %q", tasks)
	}
}

func cut(kv string) (string, string, bool) {
	for i := range kv {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}
