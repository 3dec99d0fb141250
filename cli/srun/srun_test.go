package srun

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/agent"
)

func TestParseSrun(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    srunOptions
		argv    []string
		wantErr string
	}{
		{args: []string{"python", "train.py", "-n", "3"}, argv: []string{"python", "train.py", "-n", "3"}},
		{args: []string{"-n", "4", "-N", "2-3", "--ntasks-per-node=2", "-D", "/w", "hostname"},
			want: srunOptions{ntasks: 4, nodes: 2, perNode: 2, chdir: "/w"}, argv: []string{"hostname"}},
		{args: []string{"--cpus-per-task=8", "--gpus-per-node", "8", "-l", "-u", "--mpi=pmix", "--cpu-bind=cores", "-J", "x", "--export=ALL", "torchrun", "-u", "t.py"},
			argv: []string{"torchrun", "-u", "t.py"}},
		{args: []string{"-o", "out.txt", "hostname"}, wantErr: "--output: redirect the step's output in the script"},
		{args: []string{"--pty", "bash"}, wantErr: "--pty: open a terminal session"},
		{args: []string{"--frobnicate", "x"}, wantErr: "unknown flag: --frobnicate"},
		{args: []string{"-N", "zero", "x"}, wantErr: "--nodes=zero"},
		{args: []string{"-n", "2"}, wantErr: "no command to run"},
	} {
		o, argv, err := parseSrun(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseSrun(%q): %v, want an error with %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || o != tc.want || !reflect.DeepEqual(argv, tc.argv) {
			t.Errorf("parseSrun(%q) = %+v, %q, %v; want %+v, %q", tc.args, o, argv, err, tc.want, tc.argv)
		}
	}
}

func TestPlanSrun(t *testing.T) {
	// Tasks of a job of 2 machines: one task a machine, or 4 (a process per GPU).
	oneA := slurmTask{procID: 1, localID: 0, nodeID: 1, ntasks: 2, nnodes: 2, perNode: 1}
	perGPU := slurmTask{procID: 6, localID: 2, nodeID: 1, ntasks: 8, nnodes: 2, perNode: 4}
	step := func(n, nodes, per int) []string { return stepEnv(n, nodes, per) }
	for _, tc := range []struct {
		name    string
		o       srunOptions
		t       slurmTask
		want    srunPlan
		skip    string
		wantErr string
	}{
		{name: "plain srun runs the command as this task", t: perGPU, want: srunPlan{}},
		{name: "the job's own layout", o: srunOptions{ntasks: 8, perNode: 4}, t: perGPU, want: srunPlan{env: step(8, 2, 4)}},
		{name: "-n 1 runs on task 0 only", o: srunOptions{ntasks: 1}, t: oneA, skip: "task 1 skips it"},
		{name: "-n 1 in task 0", o: srunOptions{ntasks: 1}, t: slurmTask{ntasks: 2, nnodes: 2, perNode: 1}, want: srunPlan{env: step(1, 2, 1)}},
		{name: "-n 8 from one task a machine starts 4 here", o: srunOptions{ntasks: 8}, t: oneA,
			want: srunPlan{tasks: agent.Tasks{N: 4, FirstRank: 4, FirstLocal: 0, Env: step(8, 2, 4)}}},
		{name: "--ntasks-per-node=4 from one task a machine", o: srunOptions{perNode: 4}, t: oneA,
			want: srunPlan{tasks: agent.Tasks{N: 4, FirstRank: 4, Env: step(8, 2, 4)}}},
		{name: "--ntasks-per-node=8 from a process per GPU: 2 each", o: srunOptions{perNode: 8}, t: perGPU,
			want: srunPlan{tasks: agent.Tasks{N: 2, FirstRank: 12, FirstLocal: 4, Env: step(16, 2, 8)}}},
		{name: "--ntasks-per-node=1 from a process per GPU: local task 0 renumbered", o: srunOptions{perNode: 1},
			t:    slurmTask{procID: 4, localID: 0, nodeID: 1, ntasks: 8, nnodes: 2, perNode: 4},
			want: srunPlan{env: append(step(2, 2, 1), "SLURM_PROCID=1", "RANK=1", "SLURM_LOCALID=0", "LOCAL_RANK=0")}},
		{name: "--ntasks-per-node=1 skips the other local tasks", o: srunOptions{perNode: 1}, t: perGPU, skip: "local task 2 skips it"},
		{name: "-N 1 skips the second machine", o: srunOptions{nodes: 1}, t: oneA, skip: "machine 1 skips it"},
		{name: "-N 1 on the first machine", o: srunOptions{nodes: 1}, t: slurmTask{ntasks: 2, nnodes: 2, perNode: 1}, want: srunPlan{env: step(1, 1, 1)}},
		{name: "-N past the job's machines", o: srunOptions{nodes: 3}, t: oneA, wantErr: "--nodes=3: the job has 2 machine(s)"},
		{name: "-n not a multiple", o: srunOptions{ntasks: 3}, t: oneA, wantErr: "a step has at most 2 or a multiple of 2"},
		{name: "--ntasks-per-node not a multiple", o: srunOptions{perNode: 6}, t: perGPU, wantErr: "at most 4 or a multiple of 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := planSrun(tc.o, tc.t)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case tc.skip != "":
				if !strings.Contains(p.skip, tc.skip) {
					t.Errorf("skip = %q, want %q", p.skip, tc.skip)
				}
			case !reflect.DeepEqual(p, tc.want):
				t.Errorf("plan = %+v, want %+v", p, tc.want)
			}
		})
	}
}

func TestSlurmTaskOf(t *testing.T) {
	env := map[string]string{"SLURM_JOB_ID": "5", "GPUPORTAL_JOB_ID": "5", "SLURM_PROCID": "3", "SLURM_LOCALID": "1",
		"SLURM_NODEID": "1", "SLURM_NTASKS": "4", "SLURM_NNODES": "2", "SLURM_NTASKS_PER_NODE": "2"}
	got, err := slurmTaskOf(func(k string) string { return env[k] })
	if want := (slurmTask{procID: 3, localID: 1, nodeID: 1, ntasks: 4, nnodes: 2, perNode: 2}); err != nil || got != want {
		t.Errorf("slurmTaskOf = %+v, %v; want %+v", got, err, want)
	}
	if _, err := slurmTaskOf(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "not inside a gpuportal job") {
		t.Errorf("outside a job: %v", err)
	}
	env["SLURM_NTASKS"] = "0"
	if _, err := slurmTaskOf(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "SLURM_NTASKS") {
		t.Errorf("SLURM_NTASKS=0: %v", err)
	}
}

func TestAllocatedPerNode(t *testing.T) {
	for in, want := range map[string]int{"": 0, "4": 4, "2(x3)": 2, "8,4": 8, "x": 0, "0(x2)": 0} {
		if got := allocatedPerNode(in); got != want {
			t.Errorf("allocatedPerNode(%q) = %d, want %d", in, got, want)
		}
	}
}
