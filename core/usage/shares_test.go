package usage

import (
	"math"
	"testing"
)

func TestShares(t *testing.T) {
	whole := Claim{}
	equal := Claim{Sharing: true}
	frac := func(f float64) Claim { return Claim{Sharing: true, Fraction: f} }
	for _, c := range []struct {
		name   string
		claims []Claim
		want   []float64
	}{
		{"alone, not sharing", []Claim{whole}, []float64{1}},
		{"alone, sharing", []Claim{equal}, []float64{1}},
		{"three sharing equally", []Claim{equal, equal, equal}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"fractions as asked", []Claim{frac(0.25), frac(0.5)}, []float64{0.25, 0.5}},
		{"fractions scaled to one GPU", []Claim{frac(0.75), frac(0.75)}, []float64{0.5, 0.5}},
		{"fraction beside an equal part", []Claim{frac(0.25), equal}, []float64{0.25, 0.5}},
		{"fraction of 1 or more is an equal part", []Claim{frac(1), frac(2)}, []float64{0.5, 0.5}},
		{"a whole job beside a sharing one", []Claim{whole, equal}, []float64{2.0 / 3, 1.0 / 3}},
		{"none", nil, []float64{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Shares(nil, c.claims)
			if len(got) != len(c.want) {
				t.Fatalf("Shares(%v) = %v, want %v", c.claims, got, c.want)
			}
			for k := range got {
				if math.Abs(got[k]-c.want[k]) > 1e-12 {
					t.Errorf("Shares(%v) = %v, want %v", c.claims, got, c.want)
				}
			}
		})
	}
}
