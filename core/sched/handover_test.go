package sched

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

func TestHandOver(t *testing.T) {
	g := func(node string, i int) gpu.Ref { return gpu.Ref{Node: node, Index: i} }
	starts := []Start{{JobID: 1, GPUs: []gpu.Ref{g("a", 0)}}, {JobID: 2, GPUs: []gpu.Ref{g("a", 1), g("b", 0)}}, {JobID: 3}}
	tests := []struct {
		name string
		held map[gpu.Ref]int64
		now  []int64
		wait string // part of job 2's reason; empty: no wait
	}{
		{"nothing held", nil, []int64{1, 2, 3}, ""},
		{"one GPU of a gang held", map[gpu.Ref]int64{g("b", 0): 9}, []int64{1, 3}, "job 9 has released b:0"},
		{"held elsewhere", map[gpu.Ref]int64{g("c", 0): 9}, []int64{1, 2, 3}, ""},
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

// TestPromises follows one promise: job 9 is kept back on n0:0 and n0:1,
// held by jobs 3 and 4 while they stop; job 7, placed on n0:1 meanwhile,
// is kept back; once 3 and 4 have left, 9's start is due as decided.
func TestPromises(t *testing.T) {
	g0, g1, g2 := gpu.Ref{Node: "n0", Index: 0}, gpu.Ref{Node: "n0", Index: 1}, gpu.Ref{Node: "n0", Index: 2}
	held := map[gpu.Ref]int64{g0: 4, g1: 3}
	starts := []Start{{JobID: 9, GPUs: []gpu.Ref{g0, g1}}, {JobID: 8, GPUs: []gpu.Ref{g2}}}
	now, waits := HandOver(starts, held)
	ps := Promises{}
	ps.Keep(starts, waits, held)
	if len(now) != 1 || now[0].JobID != 8 || len(ps) != 1 || !slices.Equal(ps[9].Victims, []int64{3, 4}) {
		t.Fatalf("now %+v, promises %+v: want 8 started, 9 promised n0:0-1 with victims 3 and 4", now, ps)
	}
	stopping := map[int64]bool{3: true, 4: true}
	isStopping := func(id int64) bool { return stopping[id] }
	waiting := func(id int64) bool { return id != 5 }
	tests := []struct {
		name     string
		left     []int64 // victims that leave before the step
		starts   []Start
		wantNow  []int64
		wantKept []int64
		wantDue  []int64
	}{
		{"another job's start on a promised GPU is kept back", nil, []Start{{JobID: 7, GPUs: []gpu.Ref{g1}}, {JobID: 6, GPUs: []gpu.Ref{g2}}}, []int64{6}, []int64{7}, nil},
		{"the first victim out frees nothing for others", []int64{3}, []Start{{JobID: 7, GPUs: []gpu.Ref{g1}}}, nil, []int64{7}, nil},
		{"once both have left, the start is due as decided", []int64{4}, nil, nil, nil, []int64{9}},
	}
	for _, tc := range tests {
		for _, v := range tc.left {
			delete(stopping, v)
		}
		due := ps.Due(isStopping)
		now, kept := ps.Hold(tc.starts, waiting, isStopping)
		ids := func(ss []Start) []int64 {
			var out []int64
			for _, s := range ss {
				out = append(out, s.JobID)
			}
			return out
		}
		var keptIDs []int64
		for _, w := range kept {
			keptIDs = append(keptIDs, w.JobID)
			if !strings.Contains(w.Reason, "kept for job 9") {
				t.Errorf("%s: reason %q", tc.name, w.Reason)
			}
		}
		if !slices.Equal(ids(now), tc.wantNow) || !slices.Equal(keptIDs, tc.wantKept) || !slices.Equal(ids(due), tc.wantDue) {
			t.Errorf("%s: now %v kept %v due %v; want %v %v %v", tc.name, ids(now), keptIDs, ids(due), tc.wantNow, tc.wantKept, tc.wantDue)
		}
	}
	if len(ps) != 0 {
		t.Errorf("promises left %+v, want none once due", ps)
	}
	// A promise whose job no longer waits is forgotten.
	ps.Keep(starts, waits, held)
	ps[5] = ps[9]
	delete(ps, 9)
	stopping[3] = true
	if now, _ := ps.Hold([]Start{{JobID: 7, GPUs: []gpu.Ref{g1}}}, waiting, isStopping); len(now) != 1 || len(ps) != 0 {
		t.Errorf("now %v, promises %+v: a promise to a job that no longer waits must not keep GPUs", now, ps)
	}
}
