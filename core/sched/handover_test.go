package sched

import (
	"strings"
	"testing"
)

func TestHandOver(t *testing.T) {
	g := func(node string, i int) GPURef { return GPURef{Node: node, Index: i} }
	starts := []Start{{JobID: 1, GPUs: []GPURef{g("a", 0)}}, {JobID: 2, GPUs: []GPURef{g("a", 1), g("b", 0)}}, {JobID: 3}}
	tests := []struct {
		name string
		held map[GPURef]int64
		now  []int64
		wait string // part of job 2's reason; empty: no wait
	}{
		{"nothing held", nil, []int64{1, 2, 3}, ""},
		{"one GPU of a gang held", map[GPURef]int64{g("b", 0): 9}, []int64{1, 3}, "job 9 has released b:0"},
		{"held elsewhere", map[GPURef]int64{g("c", 0): 9}, []int64{1, 2, 3}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now, waits := HandOver(starts, tc.held)
			var ids []int64
			for _, s := range now {
				ids = append(ids, s.JobID)
			}
			if len(ids) != len(tc.now) {
				t.Fatalf("starts now %v, want %v", ids, tc.now)
			}
			for i := range ids {
				if ids[i] != tc.now[i] {
					t.Fatalf("starts now %v, want %v", ids, tc.now)
				}
			}
			if tc.wait == "" && len(waits) != 0 || tc.wait != "" && (len(waits) != 1 || waits[0].JobID != 2 || !strings.Contains(waits[0].Reason, tc.wait)) {
				t.Errorf("waits %+v, want job 2 waiting for %q", waits, tc.wait)
			}
		})
	}
}
