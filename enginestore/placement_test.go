package enginestore

import (
	"reflect"
	"testing"

	"github.com/gpuportal/gpuportal/core/gpu"
)

// TestPlacementKeepsItsStoredFormat: the engine's typed placement is kept
// as "node:index" per GPU, the column's format since the first migration,
// and read back typed; what does not parse is left out.
func TestPlacementKeepsItsStoredFormat(t *testing.T) {
	tests := []struct {
		name   string
		stored []string
		typed  []gpu.Ref
	}{
		{"none", nil, nil},
		{"one GPU", []string{"n0:3"}, []gpu.Ref{{Node: "n0", Index: 3}}},
		{"two machines", []string{"node-1:0", "node-1:1", "gpu.b_2:7"},
			[]gpu.Ref{{Node: "node-1", Index: 0}, {Node: "node-1", Index: 1}, {Node: "gpu.b_2", Index: 7}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := parsePlacement(tc.stored); !reflect.DeepEqual(got, tc.typed) {
				t.Errorf("parsePlacement(%q) = %v, want %v", tc.stored, got, tc.typed)
			}
			if got := formatPlacement(tc.typed); len(got) != len(tc.stored) || (len(got) > 0 && !reflect.DeepEqual(got, tc.stored)) {
				t.Errorf("formatPlacement(%v) = %q, want %q", tc.typed, got, tc.stored)
			}
		})
	}
	if got := parsePlacement([]string{"n0", "n0:x", "n1:2"}); !reflect.DeepEqual(got, []gpu.Ref{{Node: "n1", Index: 2}}) {
		t.Errorf("malformed entries: %v, want only n1:2", got)
	}
}
