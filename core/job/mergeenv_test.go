package job

import (
	"slices"
	"testing"
)

func TestMergeEnv(t *testing.T) {
	env := []string{"A=1", "SLURM_NTASKS=8", "B=2", "SLURM_NTASKS=8", "AB=3"}
	got := MergeEnv(env, []string{"SLURM_NTASKS=1", "A=9", "C=3"})
	if want := []string{"B=2", "AB=3", "SLURM_NTASKS=1", "A=9", "C=3"}; !slices.Equal(got, want) {
		t.Errorf("MergeEnv = %q, want %q", got, want)
	}
	if env[0] != "A=1" || len(env) != 5 {
		t.Errorf("MergeEnv changed its env: %q", env)
	}
}
