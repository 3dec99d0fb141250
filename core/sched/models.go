package sched

import "strings"

// ModelProfile is the tensor-size profile of a well-known model: how much
// of its parameters sit in its single largest tensor. Data-parallel
// training synchronizes every tensor each iteration; a model whose largest
// tensor dominates (the fully connected layers of VGG and AlexNet, the
// token embedding of GPT-2) loads the network unevenly and slows down when
// its GPUs span machines, so Tiresias consolidates it. Balanced models
// (ResNet, Inception) may spread.
type ModelProfile struct {
	Name   string  // canonical name, as Models lists it
	Params float64 // parameters, millions
	// Largest is the largest tensor's parameters, millions.
	Largest float64
}

// Skew is the largest tensor's share of all parameters.
func (m ModelProfile) Skew() float64 { return m.Largest / m.Params }

// catalogue holds the built-in profiles, computed from the published
// architectures (ImageNet classifiers with 1,000 classes; BERT-base and
// GPT-2 small with their vocabularies). Sorted by name.
var catalogue = []ModelProfile{
	{Name: "alexnet", Params: 61.1, Largest: 37.7},    // fc6 9216x4096
	{Name: "bert", Params: 110, Largest: 23.4},        // word embedding 30522x768
	{Name: "bert-large", Params: 340, Largest: 31.3},  // word embedding 30522x1024
	{Name: "googlenet", Params: 6.8, Largest: 1.02},   // fc 1024x1000
	{Name: "gpt2", Params: 124, Largest: 38.6},        // token embedding 50257x768
	{Name: "inception3", Params: 23.8, Largest: 2.05}, // fc 2048x1000
	{Name: "inception4", Params: 42.7, Largest: 1.54}, // fc 1536x1000
	{Name: "resnet101", Params: 44.5, Largest: 2.36},  // 3x3 conv 512x512
	{Name: "resnet152", Params: 60.2, Largest: 2.36},  // 3x3 conv 512x512
	{Name: "resnet50", Params: 25.6, Largest: 2.36},   // 3x3 conv 512x512
	{Name: "transformer", Params: 65, Largest: 18.9},  // shared embedding 37000x512 (WMT base)
	{Name: "vgg11", Params: 132.9, Largest: 102.8},    // fc6 25088x4096
	{Name: "vgg13", Params: 133.0, Largest: 102.8},    // fc6 25088x4096
	{Name: "vgg16", Params: 138.4, Largest: 102.8},    // fc6 25088x4096
	{Name: "vgg19", Params: 143.7, Largest: 102.8},    // fc6 25088x4096
}

// aliases maps normalized spellings to catalogue names.
var aliases = map[string]string{
	"inceptionv3": "inception3",
	"inceptionv4": "inception4",
	"bertbase":    "bert",
	"bertlarge":   "bert-large",
	"gpt":         "gpt2",
	"gpt2small":   "gpt2",
}

// Models lists the built-in model catalogue, sorted by name.
func Models() []ModelProfile {
	return append([]ModelProfile(nil), catalogue...)
}

// LookupModel finds a model in the catalogue. Case, dashes, underscores,
// dots and spaces are ignored: "ResNet-50", "resnet_50" and "resnet50" are
// the same model.
func LookupModel(name string) (ModelProfile, bool) {
	key := normalizeModel(name)
	if key == "" {
		return ModelProfile{}, false
	}
	if a, ok := aliases[key]; ok {
		key = normalizeModel(a)
	}
	if i, ok := catalogueByKey[key]; ok {
		return catalogue[i], true
	}
	return ModelProfile{}, false
}

// catalogueByKey finds a catalogue entry by its normalized name (the
// first entry of that name); built once, never changed.
var catalogueByKey = func() map[string]int {
	m := make(map[string]int, len(catalogue))
	for i, p := range catalogue {
		k := normalizeModel(p.Name)
		if _, dup := m[k]; !dup {
			m[k] = i
		}
	}
	return m
}()

// normalizeModel lowercases name and drops everything but letters and
// digits. A name that is only lower-case letters and digits already is
// returned as it is.
func normalizeModel(name string) string {
	plain := true
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// skewOf returns the job's tensor-size skew and whether it is known: the
// measured value first, then the catalogue.
func skewOf(j *Job, cache *modelCache) (float64, bool) {
	if j.Skew > 0 && j.Skew <= 1 {
		return j.Skew, true
	}
	if j.Model == "" {
		return 0, false
	}
	return cache.skew(j.Model)
}

// modelCache remembers model lookups: many jobs share a model name, and
// the lookup normalizes strings. A lookup's answer never changes, so the
// cache outlives the pass (release), up to maxCachedModels names.
type modelCache struct {
	last  string
	skewV float64
	known bool
	seen  map[string]modelHit
}

type modelHit struct {
	skew  float64
	known bool
}

// maxCachedModels bounds the model names a modelCache keeps between
// passes.
const maxCachedModels = 1024

// release ends a pass: the names looked up stay, unless there are too
// many of them.
func (c *modelCache) release() {
	c.last, c.skewV, c.known = "", 0, false
	if len(c.seen) > maxCachedModels {
		c.seen = nil
	}
}

func (c *modelCache) skew(name string) (float64, bool) {
	if name == c.last && c.seen != nil {
		return c.skewV, c.known
	}
	if c.seen == nil {
		c.seen = make(map[string]modelHit)
	}
	h, ok := c.seen[name]
	if !ok {
		m, found := LookupModel(name)
		h = modelHit{known: found}
		if found {
			h.skew = m.Skew()
		}
		c.seen[name] = h
	}
	c.last, c.skewV, c.known = name, h.skew, h.known
	return h.skew, h.known
}
