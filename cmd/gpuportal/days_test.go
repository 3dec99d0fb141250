package main

import (
	"testing"
	"time"
)

func TestDaysFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"7d", 7 * 24 * time.Hour, true},
		{"36h", 36 * time.Hour, true},
		{"90d", 90 * 24 * time.Hour, true},
		{"0d", 0, false},
		{"10m", 0, false},
		{"xd", 0, false},
		{"seven", 0, false},
	} {
		var d time.Duration
		err := days{&d}.Set(tc.in)
		if (err == nil) != tc.ok || (tc.ok && d != tc.want) {
			t.Errorf("Set(%q) = %v, %v; want %v, ok %v", tc.in, d, err, tc.want, tc.ok)
		}
	}
	d := 7 * 24 * time.Hour
	if s := (days{&d}).String(); s != "7d" {
		t.Errorf("String() = %q, want 7d", s)
	}
}
