package sched

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReferenceFigures replays the openb trace the way the Tiresias
// authors' simulator did (count placement) and logs the mean JCTs next to
// theirs. It needs the trace: set GPUPORTAL_TRACES to its folder.
func TestReferenceFigures(t *testing.T) {
	dir := os.Getenv("GPUPORTAL_TRACES")
	if dir == "" {
		t.Skip("GPUPORTAL_TRACES not set")
	}
	trace := readTiresiasTrace(t, filepath.Join(dir, "openb-last6w-tiresias.csv"))
	ref := map[string][2]float64{
		"fifo":       {325866, 103891},
		"fjf":        {43820, 32233},
		"tiresias-l": {12421, 10217},
		"tiresias-g": {10967, 9755},
		"srsf":       {10450, 9608},
		"srtf":       {0, 0},
		"dlas":       {0, 0},
	}
	for _, pol := range Policies() {
		for k, nodes := range []int{3, 4} {
			sc, err := New(Config{Policy: pol, Placement: PlaceCount, OmitWaits: true})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			jct, passes := replay(t, sc, uniformNodes(nodes, 8), trace)
			t.Logf("%-10s %2d GPUs: mean JCT %8.0f s (reference %6.0f), %d passes, %v", pol, nodes*8, jct, ref[pol][k], passes, time.Since(start).Round(time.Millisecond))
		}
	}
}
