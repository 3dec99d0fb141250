package accounting

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkMeasureMonth measures a 30-day month of a 64-GPU cluster kept
// busy by 4-GPU jobs of 2 hours, with the history as the server keeps it
// by default: hours for the first 23 days, minutes for the last 7.
func BenchmarkMeasureMonth(b *testing.B) {
	const gpus, days = 64, 30
	var runs []Run
	var samples []Sample
	id := int64(0)
	for g := 0; g < gpus; g += 4 {
		for h := 0; h < days*24; h += 2 {
			id++
			end := at(float64(h + 2))
			var on []string
			for k := range 4 {
				on = append(on, fmt.Sprintf("n%d:%d", (g+k)/8, (g+k)%8))
			}
			runs = append(runs, Run{Job: id, Team: fmt.Sprintf("t%d", g%3), User: fmt.Sprintf("u%d", g%7), GPUs: on, Start: at(float64(h)), End: &end})
		}
	}
	for g := 0; g < gpus; g++ {
		name := fmt.Sprintf("n%d:%d", g/8, g%8)
		for h := 0; h < (days-7)*24; h++ {
			samples = append(samples, Sample{GPU: name, Start: at(float64(h)), Step: time.Hour, Util: 0.5})
		}
		for m := (days - 7) * 24 * 60; m < days*24*60; m++ {
			samples = append(samples, Sample{GPU: name, Start: day0.Add(time.Duration(m) * time.Minute), Step: time.Minute, Util: 0.03})
		}
	}
	b.ReportMetric(float64(len(samples)), "samples")
	b.ResetTimer()
	for b.Loop() {
		Measure(runs, samples, day0, day0.AddDate(0, 0, days), day0.AddDate(0, 0, days), 0.05)
	}
}
