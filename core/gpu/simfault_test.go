package gpu

import (
	"strings"
	"testing"
	"time"
)

func TestParseSimFaults(t *testing.T) {
	tests := []struct {
		in      string
		want    []SimFault
		wantErr string
	}{
		{"0:xid79@2s", []SimFault{{GPU: 0, XID: 79, After: 2 * time.Second}}, ""},
		{"1:ecc", []SimFault{{GPU: 1, ECC: 1, After: time.Second}}, ""},
		{"0:xid48, 3:ecc@0s", []SimFault{{GPU: 0, XID: 48, After: time.Second}, {GPU: 3, ECC: 1}}, ""},
		{"", nil, ""},
		{"xid79", nil, "no GPU index"},
		{"-1:ecc", nil, "GPU index"},
		{"0:xid", nil, "XID code"},
		{"0:fire", nil, "kind"},
		{"0:ecc@soon", nil, "delay"},
	}
	for _, tc := range tests {
		got, err := ParseSimFaults(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err = %v, want one about %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%q = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q [%d] = %+v, want %+v", tc.in, i, got[i], tc.want[i])
			}
		}
	}
}

func TestSimFaultFiresOnceAfterAJobStarts(t *testing.T) {
	s := NewSim("n", 2, 40*1024)
	t0 := time.Unix(1000, 0)
	if err := s.InjectFault(SimFault{GPU: 1, XID: 79, After: 2 * time.Second}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.InjectFault(SimFault{GPU: 0, ECC: 1}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.InjectFault(SimFault{GPU: 2, ECC: 1}, t0); err == nil {
		t.Error("a fault on GPU 2 of a 2-GPU machine was accepted")
	}
	// No job yet: nothing fires, however long it waits.
	if ss := s.Sample(t0.Add(time.Hour)); ss[1].XIDErrors != 0 || ss[0].ECCErrors != 0 {
		t.Fatalf("faults fired without a job: %+v", ss)
	}
	start := t0.Add(time.Hour)
	s.Attach(7, []int{1}, SimMemory{PersistentMiB: 1024}, start)
	if ss := s.Sample(start.Add(time.Second)); ss[1].XIDErrors != 0 {
		t.Fatalf("XID before its delay: %+v", ss[1])
	}
	for range 2 {
		ss := s.Sample(start.Add(3 * time.Second))
		if ss[1].XIDErrors != 1 || ss[1].LastXID != 79 {
			t.Fatalf("GPU 1 = %+v, want one XID 79", ss[1])
		}
		if ss[0].ECCErrors != 0 || ss[0].XIDErrors != 0 {
			t.Fatalf("GPU 0 failed with no job on it: %+v", ss[0])
		}
	}
}
