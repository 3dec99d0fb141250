package gpu

import (
	"reflect"
	"slices"
	"testing"
)

func TestParseRef(t *testing.T) {
	tests := []struct {
		in   string
		want Ref
		ok   bool
	}{
		{"d1:0", Ref{"d1", 0}, true},
		{"node-7:12", Ref{"node-7", 12}, true},
		{"fe80::1:3", Ref{"fe80::1", 3}, true}, // the last colon splits
		{"d1", Ref{}, false},
		{":3", Ref{}, false},
		{"d1:", Ref{}, false},
		{"d1:-1", Ref{}, false},
		{"d1:x", Ref{}, false},
	}
	for _, tc := range tests {
		got, ok := ParseRef(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRef(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
		if ok && got.String() != tc.in {
			t.Errorf("ParseRef(%q).String() = %q", tc.in, got.String())
		}
	}
	if got, want := ParsePlacement([]string{"a:0", "bad", " b:1"}), []Ref{{"a", 0}, {"b", 1}}; !reflect.DeepEqual(got, want) {
		t.Errorf("ParsePlacement = %v, want %v", got, want)
	}
}

func TestPlacementNodes(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string
	}{
		{nil, nil},
		{[]string{"b:0", "b:1", "a:0", "b:2", "a:1"}, []string{"b", "a"}},
		{[]string{"gpu-01.lab:3", "bad", "x:"}, []string{"gpu-01.lab"}},
	} {
		if got := PlacementNodes(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("PlacementNodes(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
