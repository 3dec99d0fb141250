// Package synergy gives each job CPUs and host memory by its measured
// sensitivity instead of in proportion to its GPUs (Synergy, Mohan et al.,
// OSDI'22).
//
// A Profile says how fast a job runs, relative to its best, as a function
// of the CPUs and host memory it holds per GPU. Profiles come, in order of
// trust, from the user, from history (the same model and batch ran
// before), from the agent's profiling phase, or from the built-in
// Catalogue of model families. Allocate starts a node's jobs from their
// proportional share (by GPUs) and moves CPUs and memory from insensitive
// to sensitive jobs, never leaving a job slower than its proportional share
// would make it and never going over the node's capacity. Simulate
// compares proportional and Synergy allocation over a trace.
//
// The package is pure: no clock, no goroutines, no I/O besides what a
// caller hands it; the same inputs give the same outputs.
package synergy

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Point is one measurement of a curve: at X (cores or GiB per GPU) the job
// runs at Speed, a fraction of its best (0 to 1].
type Point struct {
	X     float64
	Speed float64
}

// Curve is a piecewise-linear, non-decreasing function through its points,
// ordered by X. Below the first point and above the last the curve is
// flat. The empty curve is 1 everywhere: the job does not notice the
// resource.
type Curve []Point

// At is the curve's value at x.
func (c Curve) At(x float64) float64 {
	if len(c) == 0 {
		return 1
	}
	if x <= c[0].X {
		return c[0].Speed
	}
	for i := 1; i < len(c); i++ {
		if x <= c[i].X {
			a, b := c[i-1], c[i]
			if b.X == a.X {
				return b.Speed
			}
			return a.Speed + (b.Speed-a.Speed)*(x-a.X)/(b.X-a.X)
		}
	}
	return c[len(c)-1].Speed
}

// Least is the smallest x at which the curve reaches y (within a tolerance
// of 1e-9); it is 0 for the empty curve and the last point's X when the
// curve never reaches y.
func (c Curve) Least(y float64) float64 {
	const eps = 1e-9
	if len(c) == 0 || c[0].Speed >= y-eps {
		return 0
	}
	for i := 1; i < len(c); i++ {
		a, b := c[i-1], c[i]
		if b.Speed >= y-eps {
			if b.Speed == a.Speed || b.X == a.X {
				return b.X
			}
			return a.X + (b.X-a.X)*(y-a.Speed)/(b.Speed-a.Speed)
		}
	}
	return c[len(c)-1].X
}

// Saturation is the smallest x at which the curve reaches its maximum:
// more than this buys nothing.
func (c Curve) Saturation() float64 {
	if len(c) == 0 {
		return 0
	}
	best := 0.0
	for _, p := range c {
		best = math.Max(best, p.Speed)
	}
	return c.Least(best)
}

// Validate reports the first reason c is not a usable curve: points out of
// X order, a speed outside [0, 1], or a decreasing speed.
func (c Curve) Validate() error {
	for i, p := range c {
		if p.X < 0 || math.IsNaN(p.X) || math.IsInf(p.X, 0) {
			return fmt.Errorf("point %d: x %v is not a finite non-negative number", i, p.X)
		}
		if !(p.Speed >= 0 && p.Speed <= 1) {
			return fmt.Errorf("point %d: speed %v is outside [0, 1]", i, p.Speed)
		}
		if i > 0 && p.X < c[i-1].X {
			return fmt.Errorf("point %d: x %v is below the previous point's %v", i, p.X, c[i-1].X)
		}
		if i > 0 && p.Speed < c[i-1].Speed {
			return fmt.Errorf("point %d: speed %v falls from %v (curves never decrease)", i, p.Speed, c[i-1].Speed)
		}
	}
	return nil
}

// Profile is a job's sensitivity to CPUs and host memory. Its speed is
// CPU.At(cores per GPU) x Mem.At(GiB per GPU): the two resources are
// taken to act independently, as Synergy's optimistic profiling assumes.
type Profile struct {
	// Family names where the profile came from: a catalogue family, or
	// "measured", "declared", "history".
	Family string
	// CPU is speed against cores per GPU.
	CPU Curve
	// Mem is speed against host memory per GPU, in GiB.
	Mem Curve
}

// Speed is how fast a job with gpus GPUs runs, relative to its best, when
// it holds cpuMilli thousandths of a core and memMiB MiB of host memory.
func (p Profile) Speed(gpus int, cpuMilli, memMiB int64) float64 {
	g := float64(max(gpus, 1))
	return p.CPU.At(float64(cpuMilli)/1000/g) * p.Mem.At(float64(memMiB)/1024/g)
}

// Validate checks both curves.
func (p Profile) Validate() error {
	if err := p.CPU.Validate(); err != nil {
		return fmt.Errorf("profile %s: cpu curve: %w", p.Family, err)
	}
	if err := p.Mem.Validate(); err != nil {
		return fmt.Errorf("profile %s: memory curve: %w", p.Family, err)
	}
	return nil
}

// Families of the built-in catalogue.
const (
	FamilyImageCNN       = "image-cnn"
	FamilyLanguage       = "language"
	FamilySpeech         = "speech"
	FamilyRecommendation = "recommendation"
	// FamilyInsensitive is the flat profile: neither resource matters.
	// Jobs with no known profile get it, which makes Allocate hand them
	// only what keeps their proportional speed.
	FamilyInsensitive = "insensitive"
)

// catalogue holds the built-in curves. They are per GPU of a V100-class
// server and approximate the shapes the Synergy paper reports; the numbers
// are read from its figures by eye and rounded, not measured here.
var catalogue = map[string]Profile{
	// Image CNNs with heavy data loading (ResNet-18/50, ShuffleNet,
	// AlexNet, MobileNet on ImageNet with JPEG decoding and augmentation
	// on the CPU). Synergy §2, Fig. 2 (throughput against CPUs per GPU):
	// at the proportional 3 CPUs per GPU ResNet-18 runs at well under
	// half its best and needs about 9 to 12 CPUs per GPU to saturate the
	// GPU ("up to 3x"). Memory: the dataset (ImageNet-1k, about 140 GiB)
	// is read through the page cache; throughput rises as more of it fits
	// (Synergy §2 Fig. 3, after the DS-Analyzer/CoorDL study of data
	// stalls, Mohan et al., VLDB'21).
	FamilyImageCNN: {
		Family: FamilyImageCNN,
		CPU:    Curve{{0, 0}, {1, 0.17}, {3, 0.42}, {6, 0.75}, {9, 0.95}, {12, 1}},
		Mem:    Curve{{0, 0.6}, {32, 0.68}, {62.5, 0.78}, {128, 0.95}, {160, 1}},
	},
	// Language models (GNMT, Transformer, LSTM language models, BERT):
	// Synergy §2, Fig. 2: "GNMT remains unaffected" by CPUs beyond one
	// per GPU; tokenized text is small and stays in memory.
	FamilyLanguage: {
		Family: FamilyLanguage,
		CPU:    Curve{{0, 0}, {0.5, 0.9}, {1, 1}},
		Mem:    Curve{{0, 0.95}, {8, 1}},
	},
	// Speech (DeepSpeech2, M5 on raw audio): Synergy §2, Fig. 2 shows the
	// audio model M5 CPU-bound on feature extraction, saturating near 6
	// CPUs per GPU; audio datasets are a few tens of GiB.
	FamilySpeech: {
		Family: FamilySpeech,
		CPU:    Curve{{0, 0}, {1, 0.35}, {3, 0.7}, {6, 1}},
		Mem:    Curve{{0, 0.8}, {32, 1}},
	},
	// Recommendation (DLRM, NCF/NeuMF on click logs): light CPU work but
	// large embedding tables and datasets held in host memory; Synergy's
	// workload mix includes recommendation models and notes their memory
	// sensitivity. Shape by analogy; measure before trusting it.
	FamilyRecommendation: {
		Family: FamilyRecommendation,
		CPU:    Curve{{0, 0}, {1, 0.6}, {2, 0.9}, {4, 1}},
		Mem:    Curve{{0, 0.4}, {32, 0.6}, {64, 0.85}, {96, 1}},
	},
	FamilyInsensitive: {Family: FamilyInsensitive},
}

// Families lists the catalogue's families, sorted.
func Families() []string {
	out := make([]string, 0, len(catalogue))
	for f := range catalogue {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// CatalogueProfile returns the built-in profile of a family.
func CatalogueProfile(family string) (Profile, bool) {
	p, ok := catalogue[family]
	return p, ok
}

// familyPrefixes maps model-name prefixes to families, longest first
// within no particular order; FamilyOf tries them all.
var familyPrefixes = []struct {
	prefix, family string
}{
	{"resnet", FamilyImageCNN}, {"resnext", FamilyImageCNN}, {"vgg", FamilyImageCNN},
	{"alexnet", FamilyImageCNN}, {"shufflenet", FamilyImageCNN}, {"mobilenet", FamilyImageCNN},
	{"inception", FamilyImageCNN}, {"densenet", FamilyImageCNN}, {"efficientnet", FamilyImageCNN},
	{"googlenet", FamilyImageCNN}, {"squeezenet", FamilyImageCNN}, {"vit", FamilyImageCNN},
	{"bert", FamilyLanguage}, {"gpt", FamilyLanguage}, {"gnmt", FamilyLanguage},
	{"transformer", FamilyLanguage}, {"lstm", FamilyLanguage}, {"xlnet", FamilyLanguage},
	{"t5", FamilyLanguage}, {"llama", FamilyLanguage}, {"seq2seq", FamilyLanguage},
	{"deepspeech", FamilySpeech}, {"m5", FamilySpeech}, {"wav2vec", FamilySpeech},
	{"speech", FamilySpeech}, {"audio", FamilySpeech}, {"conformer", FamilySpeech},
	{"dlrm", FamilyRecommendation}, {"ncf", FamilyRecommendation}, {"neumf", FamilyRecommendation},
	{"deepfm", FamilyRecommendation}, {"widedeep", FamilyRecommendation}, {"wide_deep", FamilyRecommendation},
	{"recommend", FamilyRecommendation},
}

// FamilyOf names the catalogue family of a model name such as "resnet50"
// or "BERT-large", matching known prefixes case-insensitively; unknown
// names are FamilyInsensitive.
func FamilyOf(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	for _, fp := range familyPrefixes {
		if strings.HasPrefix(m, fp.prefix) {
			return fp.family
		}
	}
	return FamilyInsensitive
}

// Source says where a resolved profile came from.
type Source string

// Sources of a profile, most trusted first.
const (
	SourceDeclared  Source = "declared"
	SourceHistory   Source = "history"
	SourceCatalogue Source = "catalogue"
	// SourceNone means nothing was known: the flat profile, which keeps
	// the job at its proportional share.
	SourceNone Source = "none"
)

// historyKey identifies a model and batch size in History.
type historyKey struct {
	model string
	batch int
}

// History remembers measured profiles by model and batch size, so a job
// that ran before need not be profiled again. The zero value is empty
// and ready; it is not safe for concurrent use.
type History struct {
	byKey map[historyKey]Profile
}

// Record keeps p as the profile of model at batch size batch, replacing
// any earlier one. Model names compare case-insensitively.
func (h *History) Record(model string, batch int, p Profile) {
	if h.byKey == nil {
		h.byKey = map[historyKey]Profile{}
	}
	h.byKey[historyKey{strings.ToLower(model), batch}] = p
}

// Lookup returns the profile recorded for model at batch size batch;
// without one for that batch, the one recorded for the nearest batch size
// of the same model (ties to the smaller), since data loading per sample
// changes little with batch size.
func (h *History) Lookup(model string, batch int) (Profile, bool) {
	m := strings.ToLower(model)
	if p, ok := h.byKey[historyKey{m, batch}]; ok {
		return p, true
	}
	best, found := historyKey{}, false
	for k := range h.byKey {
		if k.model != m {
			continue
		}
		d, bd := absInt(k.batch-batch), absInt(best.batch-batch)
		if !found || d < bd || (d == bd && k.batch < best.batch) {
			best, found = k, true
		}
	}
	if !found {
		return Profile{}, false
	}
	return h.byKey[best], true
}

func absInt(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// Resolve picks a job's profile: the declared one when given, else the
// one history holds for its model and batch, else its model family's from
// the catalogue, else the flat profile.
func Resolve(declared *Profile, h *History, model string, batch int) (Profile, Source) {
	if declared != nil {
		return *declared, SourceDeclared
	}
	if h != nil && model != "" {
		if p, ok := h.Lookup(model, batch); ok {
			return p, SourceHistory
		}
	}
	if f := FamilyOf(model); f != FamilyInsensitive {
		return catalogue[f], SourceCatalogue
	}
	return catalogue[FamilyInsensitive], SourceNone
}

// FamilyForRequest guesses the catalogue family of a job that names no
// model (openb pods) from what it asked for per GPU: 64 GiB of host
// memory or more is a recommendation model; 8 cores or more an image
// CNN with heavy data loading; 5 to 8 cores speech; anything less a
// language model. The thresholds follow the catalogue's saturation
// points: a pod's owner asks for about what the job needs. This is an
// assumption, stated in docs/synergy.md, not a fact about the trace.
func FamilyForRequest(gpus int, cpuMilli, memMiB int64) string {
	g := float64(max(gpus, 1))
	cores, gib := float64(cpuMilli)/1000/g, float64(memMiB)/1024/g
	switch {
	case gib >= 64:
		return FamilyRecommendation
	case cores >= 8:
		return FamilyImageCNN
	case cores >= 5:
		return FamilySpeech
	}
	return FamilyLanguage
}
