package synergy

import (
	"math"
	"math/rand/v2"
	"testing"
)

func prof(f string) Profile {
	p, ok := CatalogueProfile(f)
	if !ok {
		panic("no family " + f)
	}
	return p
}

func TestCurve(t *testing.T) {
	c := Curve{{0, 0}, {2, 0.5}, {4, 1}}
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"below the first point is flat", Curve{{1, 0.3}, {2, 1}}.At(0), 0.3},
		{"interpolates", c.At(1), 0.25},
		{"above the last point is flat", c.At(10), 1},
		{"the empty curve is 1", Curve(nil).At(3), 1},
		{"least inverts", c.Least(0.75), 3},
		{"least of a reachable start is 0", Curve{{0, 0.9}, {1, 1}}.Least(0.5), 0},
		{"saturation is where the maximum starts", Curve{{0, 0}, {3, 1}, {9, 1}}.Saturation(), 3},
	}
	for _, tc := range tests {
		if math.Abs(tc.got-tc.want) > 1e-12 {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestCatalogueValid(t *testing.T) {
	for _, f := range Families() {
		if err := prof(f).Validate(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	bad := []Curve{{{1, 0.5}, {0, 0.6}}, {{0, 0.5}, {1, 0.4}}, {{0, 1.5}}}
	for _, c := range bad {
		if c.Validate() == nil {
			t.Errorf("%v: validated, want an error", c)
		}
	}
}

func TestFamilyOfAndResolve(t *testing.T) {
	for model, want := range map[string]string{
		"resnet50": FamilyImageCNN, "BERT-large": FamilyLanguage, "deepspeech2": FamilySpeech,
		"dlrm": FamilyRecommendation, "my-model": FamilyInsensitive, "": FamilyInsensitive,
	} {
		if got := FamilyOf(model); got != want {
			t.Errorf("FamilyOf(%q) = %s, want %s", model, got, want)
		}
	}
	var h History
	measured := Profile{Family: "measured", CPU: Curve{{0, 0}, {5, 1}}}
	h.Record("ResNet50", 64, measured)
	declared := Profile{Family: "declared"}
	tests := []struct {
		name     string
		declared *Profile
		model    string
		batch    int
		want     Source
		family   string
	}{
		{"declared wins", &declared, "resnet50", 64, SourceDeclared, "declared"},
		{"history by model and batch", nil, "resnet50", 64, SourceHistory, "measured"},
		{"history by nearest batch", nil, "resnet50", 256, SourceHistory, "measured"},
		{"catalogue by family", nil, "resnet18", 32, SourceCatalogue, FamilyImageCNN},
		{"nothing known is flat", nil, "mystery", 1, SourceNone, FamilyInsensitive},
	}
	for _, tc := range tests {
		p, src := Resolve(tc.declared, &h, tc.model, tc.batch)
		if src != tc.want || p.Family != tc.family {
			t.Errorf("%s: got %s/%s, want %s/%s", tc.name, src, p.Family, tc.want, tc.family)
		}
	}
}

// checkInvariants asserts the two rules of Allocate: no job below its
// proportional speed, no node over its capacity.
func checkInvariants(t *testing.T, node NodeResources, jobs []JobDemand, as []Allocation) {
	t.Helper()
	var cpu, mem int64
	for i, a := range as {
		if a.ID != jobs[i].ID {
			t.Fatalf("allocation %d is for job %d, want %d", i, a.ID, jobs[i].ID)
		}
		if a.Speed < a.PropSpeed-1e-9 {
			t.Errorf("job %d: speed %v below its proportional %v (%s)", a.ID, a.Speed, a.PropSpeed, a.Reason)
		}
		if a.CPUMilli < 0 || a.MemMiB < 0 {
			t.Errorf("job %d: negative allocation %+v", a.ID, a)
		}
		cpu += a.CPUMilli
		mem += a.MemMiB
	}
	if cpu > node.CPUMilli || mem > node.MemMiB {
		t.Errorf("node over capacity: %d/%d milli, %d/%d MiB", cpu, node.CPUMilli, mem, node.MemMiB)
	}
}

func TestAllocate(t *testing.T) {
	node := SynergyNode
	img, lang, speech, rec := prof(FamilyImageCNN), prof(FamilyLanguage), prof(FamilySpeech), prof(FamilyRecommendation)
	tests := []struct {
		name  string
		jobs  []JobDemand
		check func(t *testing.T, as []Allocation)
	}{
		{"an image job takes CPUs a language job does not need",
			[]JobDemand{{ID: 1, GPUs: 4, Profile: img}, {ID: 2, GPUs: 4, Profile: lang}},
			func(t *testing.T, as []Allocation) {
				if as[0].CPUMilli <= as[0].PropCPUMilli || as[0].Speed <= as[0].PropSpeed {
					t.Errorf("image job did not gain: %s", as[0].Reason)
				}
				if as[1].CPUMilli >= as[1].PropCPUMilli {
					t.Errorf("language job kept its share: %s", as[1].Reason)
				}
			}},
		{"a recommendation job takes memory",
			[]JobDemand{{ID: 1, GPUs: 4, Profile: rec}, {ID: 2, GPUs: 4, Profile: lang}},
			func(t *testing.T, as []Allocation) {
				if as[0].MemMiB <= as[0].PropMemMiB {
					t.Errorf("recommendation job got no memory: %s", as[0].Reason)
				}
			}},
		{"two equally sensitive jobs of equal size split evenly",
			[]JobDemand{{ID: 1, GPUs: 4, Profile: img}, {ID: 2, GPUs: 4, Profile: img}},
			func(t *testing.T, as []Allocation) {
				if d := as[0].CPUMilli - as[1].CPUMilli; d < -500 || d > 500 {
					t.Errorf("uneven split %d vs %d", as[0].CPUMilli, as[1].CPUMilli)
				}
			}},
		{"idle GPUs' shares go to the sensitive job",
			[]JobDemand{{ID: 7, GPUs: 1, Profile: img}},
			func(t *testing.T, as []Allocation) {
				if math.Abs(as[0].Speed-1) > 1e-9 {
					t.Errorf("alone on the node, the image job should saturate: %s", as[0].Reason)
				}
			}},
		{"a floor is kept",
			[]JobDemand{{ID: 1, GPUs: 4, Profile: lang, MinCPUMilli: 10000}, {ID: 2, GPUs: 4, Profile: speech}},
			func(t *testing.T, as []Allocation) {
				if as[0].CPUMilli < 10000 {
					t.Errorf("language job went below its floor: %d", as[0].CPUMilli)
				}
			}},
		{"oversubscribed GPUs shrink shares instead of overflowing",
			[]JobDemand{{ID: 1, GPUs: 8, Profile: img}, {ID: 2, GPUs: 8, Profile: lang}},
			func(t *testing.T, as []Allocation) {
				if as[0].PropCPUMilli != node.CPUMilli/2 {
					t.Errorf("share %d, want half the node", as[0].PropCPUMilli)
				}
			}},
		{"no jobs, no allocations", nil,
			func(t *testing.T, as []Allocation) {
				if len(as) != 0 {
					t.Errorf("got %d allocations", len(as))
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			as := Allocate(node, tc.jobs)
			checkInvariants(t, node, tc.jobs, as)
			tc.check(t, as)
		})
	}
}

// randomProfile draws a valid non-decreasing profile.
func randomProfile(r *rand.Rand) Profile {
	curve := func() Curve {
		if r.IntN(4) == 0 {
			return nil
		}
		n := 1 + r.IntN(5)
		c := make(Curve, n)
		x, y := 0.0, r.Float64()*0.5
		for i := range c {
			c[i] = Point{x, y}
			x += r.Float64() * 8
			y = math.Min(1, y+r.Float64()*0.5)
		}
		return c
	}
	return Profile{Family: "random", CPU: curve(), Mem: curve()}
}

func TestAllocateProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 22))
	for trial := range 300 {
		node := NodeResources{GPUs: 1 + r.IntN(8), CPUMilli: int64(1000 + r.IntN(64000)), MemMiB: int64(1024 + r.IntN(512*1024))}
		var jobs []JobDemand
		for left := node.GPUs; left > 0 && r.IntN(5) > 0; {
			g := 1 + r.IntN(left)
			left -= g
			jobs = append(jobs, JobDemand{ID: int64(len(jobs)), GPUs: g, Profile: randomProfile(r)})
		}
		as := Allocate(node, jobs)
		checkInvariants(t, node, jobs, as)
		again := Allocate(node, jobs)
		for i := range as {
			if as[i] != again[i] {
				t.Fatalf("trial %d: not deterministic: %+v then %+v", trial, as[i], again[i])
			}
		}
		if t.Failed() {
			t.Fatalf("trial %d: node %+v", trial, node)
		}
	}
}

func TestProportionalOnlyInsensitive(t *testing.T) {
	// Flat jobs gain nothing from more, so Synergy leaves their speed
	// where proportional allocation puts it.
	jobs := []JobDemand{{ID: 1, GPUs: 3}, {ID: 2, GPUs: 5}}
	for _, a := range Allocate(SynergyNode, jobs) {
		if a.Speed != 1 || a.PropSpeed != 1 {
			t.Errorf("flat job %d: speed %v, proportional %v", a.ID, a.Speed, a.PropSpeed)
		}
	}
}

func BenchmarkAllocate(b *testing.B) {
	jobs := []JobDemand{
		{ID: 1, GPUs: 2, Profile: prof(FamilyImageCNN)}, {ID: 2, GPUs: 1, Profile: prof(FamilyLanguage)},
		{ID: 3, GPUs: 1, Profile: prof(FamilySpeech)}, {ID: 4, GPUs: 2, Profile: prof(FamilyRecommendation)},
		{ID: 5, GPUs: 1, Profile: prof(FamilyImageCNN)}, {ID: 6, GPUs: 1, Profile: prof(FamilyLanguage)},
	}
	for b.Loop() {
		Allocate(SynergyNode, jobs)
	}
}
