package app

import (
	"testing"

	"github.com/gpuportal/gpuportal/core/engine"
)

func TestNodeState(t *testing.T) {
	tests := []struct {
		name string
		st   engine.NodeStatus
		want string
	}{
		{"ready", engine.NodeStatus{}, "ready"},
		{"cordoned, running jobs", engine.NodeStatus{Cordoned: true, Jobs: []int64{1}}, "cordoned"},
		{"cordoned, empty", engine.NodeStatus{Cordoned: true}, "cordoned"},
		{"draining until its jobs are gone", engine.NodeStatus{Draining: true, Jobs: []int64{1}}, "draining"},
		{"then drained", engine.NodeStatus{Draining: true}, "drained"},
		{"a drain outranks a cordon", engine.NodeStatus{Draining: true, Cordoned: true, Jobs: []int64{1}}, "draining"},
	}
	for _, tc := range tests {
		if got := NodeAPI(tc.st).State; got != tc.want {
			t.Errorf("%s: state %q, want %q", tc.name, got, tc.want)
		}
	}
}
