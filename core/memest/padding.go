package memest

import "math"

// Padding is the safety margin added to an estimate at admission: P is
// multiplied by Persistent, then the total by Total, and E takes the
// rest. A zero factor means the default (1.1 and 1.05, so the zero
// Padding is the default padding); 1 means no margin.
type Padding struct {
	Persistent float64
	Total      float64
}

// The default factors.
const (
	DefaultPersistentPad = 1.1
	DefaultTotalPad      = 1.05
)

// NoPadding admits estimates as they are.
var NoPadding = Padding{Persistent: 1, Total: 1}

// factors returns the factors in use, defaults filled in and anything
// below 1 (or not a number) taken as 1.
func (p Padding) factors() (pf, tf float64) {
	pf, tf = p.Persistent, p.Total
	if pf == 0 {
		pf = DefaultPersistentPad
	}
	if tf == 0 {
		tf = DefaultTotalPad
	}
	if !(pf >= 1) || math.IsInf(pf, 1) {
		pf = 1
	}
	if !(tf >= 1) || math.IsInf(tf, 1) {
		tf = 1
	}
	return pf, tf
}

// Apply pads e: P' = ceil(P x Persistent), then the total
// T' = ceil((P' + E) x Total), and E' = T' - P'. The source is kept.
func (p Padding) Apply(e Estimate) Estimate {
	pf, tf := p.factors()
	pp := ceilMul(e.PersistentMiB, pf)
	total := ceilMul(pp+e.EphemeralMiB, tf)
	return Estimate{PersistentMiB: pp, EphemeralMiB: total - pp, Source: e.Source}
}

// ephemeral pads a measured E for a job whose padded P is pp.
func (p Padding) ephemeral(pp int64, e float64) int64 {
	_, tf := p.factors()
	return int64(math.Ceil((float64(pp)+e)*tf-1e-9)) - pp
}

// ceilMul returns ceil(v x f), forgiving float error just above a whole
// number (100 x 1.1 is 110.00000000000001).
func ceilMul(v int64, f float64) int64 {
	return int64(math.Ceil(float64(v)*f - 1e-9))
}
