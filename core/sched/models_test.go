package sched

import (
	"slices"
	"testing"
)

func TestLookupModelIgnoresSpelling(t *testing.T) {
	for _, name := range []string{"resnet50", "ResNet-50", "resnet_50", " RESNET 50 "} {
		m, ok := LookupModel(name)
		if !ok || m.Name != "resnet50" {
			t.Errorf("LookupModel(%q) = %+v, %v; want resnet50", name, m, ok)
		}
	}
	for alias, want := range map[string]string{"Inception-v3": "inception3", "BERT-base": "bert", "GPT-2": "gpt2"} {
		if m, ok := LookupModel(alias); !ok || m.Name != want {
			t.Errorf("LookupModel(%q) = %+v, %v; want %s", alias, m, ok, want)
		}
	}
	if _, ok := LookupModel("my-own-net"); ok {
		t.Error("an unknown model was found")
	}
}

func TestCatalogueSkew(t *testing.T) {
	// Tiresias consolidates the models whose largest tensor dominates.
	skewed := []string{"alexnet", "gpt2", "transformer", "vgg11", "vgg13", "vgg16", "vgg19"}
	for _, m := range Models() {
		want := slices.Contains(skewed, m.Name)
		if got := m.Skew() >= DefaultSkewThreshold; got != want {
			t.Errorf("%s: skew %.3f, consolidated %v, want %v", m.Name, m.Skew(), got, want)
		}
	}
}

func TestModelsAreSorted(t *testing.T) {
	ms := Models()
	if !slices.IsSortedFunc(ms, func(a, b ModelProfile) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	}) {
		t.Error("Models is not sorted by name")
	}
}
