package api

import (
	"testing"
	"time"
)

func TestForecastWords(t *testing.T) {
	now := time.Date(2026, 12, 1, 2, 9, 31, 600_000_000, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	expected := func(earliest, likely, latest time.Duration) *Forecast {
		return &Forecast{State: ForecastExpected, Earliest: at(earliest), Likely: at(likely), Latest: at(latest)}
	}
	tests := []struct {
		name        string
		f           *Forecast
		text, short string
	}{
		{"a range", expected(time.Minute, 90*time.Second, 5*time.Minute),
			"between 02:10:31 and 02:14:31 (in 1m00s to 5m00s), likely 02:11:01", "02:10:31–02:14:31"},
		// Seen live: the range's ends 0.4 s apart read as two clocks and
		// one duration, "between 02:09:45 and 02:09:46 (in 14s to 14s)".
		{"ends that read as one clock", expected(13*time.Second+500*time.Millisecond, 13*time.Second+700*time.Millisecond, 13*time.Second+900*time.Millisecond),
			"at 02:09:45 (in 14s)", "02:09:45"},
		{"ends a second apart that read as one duration", expected(13*time.Second+200*time.Millisecond, 13*time.Second+300*time.Millisecond, 13*time.Second+450*time.Millisecond),
			"between 02:09:44 and 02:09:45 (in 13s), likely 02:09:44", "02:09:44–02:09:45"},
		{"the same ends", expected(time.Hour, time.Hour, time.Hour), "at 03:09:31 (in 1h00m)", "03:09:31"},
		{"ends on another day within one minute", expected(30*time.Hour, 30*time.Hour+10*time.Second, 30*time.Hour+20*time.Second),
			"at Dec 2 08:09 (in 1d6h)", "Dec 2 08:09"},
		{"about to start", expected(0, time.Second, 2*time.Second), "now: it starts at the next pass", "now"},
		{"no later bound", &Forecast{State: ForecastExpected, Earliest: at(time.Minute), Likely: at(2 * time.Minute)},
			"after 02:10:31, likely 02:11:31 (in 2m00s); no later bound: jobs submitted later may overtake it", "after 02:10:31"},
		{"unknown", &Forecast{State: ForecastUnknown, Reason: "run times are not known yet"}, "unknown: run times are not known yet", "?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.f.Text(now, time.UTC); got != tt.text {
				t.Errorf("Text = %q, want %q", got, tt.text)
			}
			if got := tt.f.Short(now, time.UTC); got != tt.short {
				t.Errorf("Short = %q, want %q", got, tt.short)
			}
		})
	}
}
