// Package jct summarizes job completion times: the figures the portal's
// live view and the simulator's report both show.
package jct

import (
	"math"
	"slices"
)

// Summary describes a set of JCTs, in seconds.
type Summary struct {
	Count         int
	Avg           float64
	P50, P95, P99 float64
}

// Summarize computes the summary of jcts. It sorts jcts in place.
func Summarize(jcts []float64) Summary {
	if len(jcts) == 0 {
		return Summary{}
	}
	slices.Sort(jcts)
	sum := 0.0
	for _, v := range jcts {
		sum += v
	}
	return Summary{
		Count: len(jcts), Avg: sum / float64(len(jcts)),
		P50: Percentile(jcts, 50), P95: Percentile(jcts, 95), P99: Percentile(jcts, 99),
	}
}

// Percentile is the nearest-rank p-th percentile of sorted values: the
// smallest value with at least p% of the values at or below it.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// CDF returns, for sorted values, at most points (x, fraction at or below
// x) pairs spread evenly over the ranks, ending at the largest value.
func CDF(sorted []float64, points int) (xs, fs []float64) {
	n := len(sorted)
	if n == 0 || points < 1 {
		return nil, nil
	}
	step := max(1, n/points)
	for i := step - 1; i < n; i += step {
		xs = append(xs, sorted[i])
		fs = append(fs, float64(i+1)/float64(n))
	}
	if xs[len(xs)-1] != sorted[n-1] || fs[len(fs)-1] != 1 {
		xs, fs = append(xs, sorted[n-1]), append(fs, 1)
	}
	return xs, fs
}
