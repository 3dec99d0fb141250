package memest

import (
	"errors"
	"testing"
)

// TestFor checks the order of the sources and each source's rule.
func TestFor(t *testing.T) {
	cases := []struct {
		name    string
		req     Request
		want    Estimate
		wantErr error
	}{
		{"declared P and E win", Request{PersistentMiB: 100, EphemeralMiB: 900, Model: "vgg16", Batch: 50}, Estimate{100, 900, Declared}, nil},
		{"a declared total is split by the catalogue's P", Request{TotalMiB: 10000, Model: "vgg16", Batch: 50}, Estimate{1587, 8413, Declared}, nil},
		{"a declared total of an unknown model gives P a fifth", Request{TotalMiB: 1000}, Estimate{200, 800, Declared}, nil},
		{"the catalogue at a measured batch, rounded up", Request{Model: "VGG-16", Batch: 25}, Estimate{1587, 5028, Catalogue}, nil},
		{"the catalogue interpolates E between batches", Request{Model: "resnet50", Batch: 30}, Estimate{215, 2281, Catalogue}, nil},
		{"the catalogue scales E below the smallest batch", Request{Model: "resnet50", Batch: 5}, Estimate{215, 381, Catalogue}, nil},
		{"the catalogue scales E above the largest batch", Request{Model: "resnet50", Batch: 150}, Estimate{215, 11401, Catalogue}, nil},
		{"a model sized by name ignores the batch", Request{Model: "seq2seq_large"}, Estimate{344, 5171, Catalogue}, nil},
		{"a declared part overrides the catalogue's", Request{EphemeralMiB: 3000, Model: "vgg16", Batch: 50}, Estimate{1587, 3000, Catalogue}, nil},
		// 25.6 M parameters: P = 16 x 25.6e6 B = 390.6 MiB; E = 4.5 x 25.6e6 x 32 B = 3515.6 MiB.
		{"parameters and batch size as the last resort", Request{Model: "mystery", Parameters: 25_600_000, Batch: 32}, Estimate{391, 3516, Params}, nil},
		{"nothing known", Request{}, Estimate{}, ErrUnknown},
		{"an unknown model without parameters", Request{Model: "mystery", Batch: 8}, Estimate{}, ErrUnknown},
		{"a catalogue model without a batch size", Request{Model: "resnet50"}, Estimate{}, ErrUnknown},
		{"negative values", Request{PersistentMiB: -1}, Estimate{}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := For(c.req)
			if c.name == "negative values" {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if c.wantErr != nil || err != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v, want %v", err, c.wantErr)
				}
				return
			}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestPadding checks the padding rule: P x 1.1, then the total x 1.05,
// both rounded up.
func TestPadding(t *testing.T) {
	cases := []struct {
		name string
		pad  Padding
		in   Estimate
		want Estimate
	}{
		{"the zero Padding is the default", Padding{}, Estimate{100, 900, Declared}, Estimate{110, 951, Declared}}, // (110 + 900) x 1.05 = 1060.5 -> 1061
		{"VGG-16 at batch 50", Padding{}, Estimate{1587, 8158, Catalogue}, Estimate{1746, 8654, Catalogue}},        // (1746 + 8158) x 1.05 = 10399.2 -> 10400
		{"no padding", NoPadding, Estimate{100, 900, Declared}, Estimate{100, 900, Declared}},
		{"factors below 1 are 1", Padding{Persistent: 0.5, Total: -2}, Estimate{7, 9, Params}, Estimate{7, 9, Params}},
		{"nothing stays nothing", Padding{}, Estimate{}, Estimate{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.pad.Apply(c.in); got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestTracker checks the online correction of E.
func TestTracker(t *testing.T) {
	tr := NewTracker(Estimate{100, 1000, Catalogue}, NoPadding)
	if got := tr.Padded(); got != (Estimate{100, 1000, Catalogue}) {
		t.Fatalf("before peaks: %+v", got)
	}
	tr.Observe(0) // not measured: ignored
	tr.Observe(400)
	tr.Observe(500)
	if got := tr.Padded(); got.EphemeralMiB != 1000 || tr.Samples() != 2 {
		t.Fatalf("two peaks must not correct E yet: %+v", got)
	}
	tr.Observe(600)
	if got := tr.Padded(); got != (Estimate{100, 600, Measured}) { // mean 500, largest 600
		t.Fatalf("after three peaks: %+v", got)
	}
	tr2 := NewTracker(Estimate{100, 1000, Catalogue}, Padding{})
	for range 3 {
		tr2.Observe(500)
	}
	// P' = 110; ceil((110 + 500) x 1.05) = 641, so E' = 531.
	if got := tr2.Padded(); got != (Estimate{110, 531, Measured}) {
		t.Fatalf("padded correction: %+v", got)
	}
	tr3 := NewTracker(Estimate{100, 300, Declared}, Padding{})
	tr3.Observe(450)
	if got := tr3.Requeue(); got != (Estimate{100, 450, Measured}) {
		t.Fatalf("requeue: %+v", got)
	}
}

// TestTrackerFloor: a correction never takes E below what the job asked
// for, nor below a measured admitted E; a declared or catalogue E is
// corrected freely; a requeue covers the asks.
func TestTrackerFloor(t *testing.T) {
	tests := []struct {
		name         string
		base         Estimate
		asks         []int64
		peaks        []int64
		wantE        int64 // Padded().EphemeralMiB, no padding
		wantRequeueE int64
	}{
		{"no ask: E follows the peaks", Estimate{100, 4096, Declared}, nil, []int64{1000, 1000, 1000}, 1000, 4096},
		{"a constant ask is honoured", Estimate{100, 4096, Declared}, []int64{4096, 4096, 4096}, []int64{1000, 1000, 1000}, 4096, 4096},
		{"the largest ask is the floor", Estimate{100, 1000, Declared}, []int64{3000, 2000}, []int64{900, 900, 900}, 3000, 3000},
		{"an ask raises E before three peaks", Estimate{100, 1000, Declared}, []int64{2500}, []int64{900}, 2500, 2500},
		{"an ask of 0 says nothing", Estimate{100, 4096, Declared}, []int64{0}, []int64{1000, 1000, 1000}, 1000, 4096},
		{"a measured admitted E is the floor", Estimate{100, 2000, Measured}, nil, []int64{1000, 1000, 1000}, 2000, 2000},
		{"a catalogue E is not a floor", Estimate{100, 2000, Catalogue}, nil, []int64{1000, 1000, 1000}, 1000, 2000},
		{"peaks above the ask win", Estimate{100, 1000, Declared}, []int64{1500}, []int64{1800, 1800, 1800}, 1800, 1800},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTracker(tc.base, NoPadding)
			for _, a := range tc.asks {
				tr.Expect(a)
			}
			for _, p := range tc.peaks {
				tr.Observe(p)
			}
			if got := tr.Padded().EphemeralMiB; got != tc.wantE {
				t.Errorf("E %d, want %d", got, tc.wantE)
			}
			if got := tr.Requeue().EphemeralMiB; got != tc.wantRequeueE {
				t.Errorf("requeue E %d, want %d", got, tc.wantRequeueE)
			}
		})
	}
}
