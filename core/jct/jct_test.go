package jct

import (
	"reflect"
	"testing"
)

func TestPercentileNearestRank(t *testing.T) {
	v := []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	tests := []struct {
		p, want float64
	}{{50, 50}, {95, 100}, {10, 10}, {11, 20}, {0, 10}, {100, 100}}
	for _, tc := range tests {
		if got := Percentile(v, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("percentile of nothing should be 0")
	}
}

func TestSummarize(t *testing.T) {
	got := Summarize([]float64{30, 10, 20})
	want := Summary{Count: 3, Avg: 20, P50: 20, P95: 30, P99: 30}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if (Summarize(nil) != Summary{}) {
		t.Error("summary of nothing should be zero")
	}
}

func TestCDF(t *testing.T) {
	xs, fs := CDF([]float64{1, 2, 3, 4, 5}, 2)
	if !reflect.DeepEqual(xs, []float64{2, 4, 5}) || !reflect.DeepEqual(fs, []float64{0.4, 0.8, 1}) {
		t.Errorf("CDF = %v %v", xs, fs)
	}
	if xs, _ := CDF(nil, 5); xs != nil {
		t.Error("CDF of nothing should be empty")
	}
}
