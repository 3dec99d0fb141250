package server

import (
	"io"
	"strings"
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

func TestHistoryFlags(t *testing.T) {
	f, err := parseServeFlags([]string{"--history-raw", "2d", "--history-keep", "30d"}, io.Discard)
	if err != nil || f.historyRaw != 48*time.Hour || f.historyKeep != 30*24*time.Hour {
		t.Errorf("flags = %v, %v, %v", f.historyRaw, f.historyKeep, err)
	}
	if f, err := parseServeFlags(nil, io.Discard); err != nil || f.historyRaw != 7*24*time.Hour || f.historyKeep != 90*24*time.Hour {
		t.Errorf("defaults = %v, %v, %v", f.historyRaw, f.historyKeep, err)
	}
	if _, err := parseServeFlags([]string{"--history-raw", "10d", "--history-keep", "2d"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--history-keep") {
		t.Errorf("keep shorter than raw: %v", err)
	}
	if _, err := parseServeFlags([]string{"--history-raw", "soon"}, io.Discard); err == nil || !strings.Contains(err.Error(), "history-raw") {
		t.Errorf("bad value: %v", err)
	}
}

func TestServeDBMaxConns(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
		err  string
	}{
		{nil, 0, ""},
		{[]string{"--db-max-conns", "4"}, 4, ""},
		{[]string{"--db-max-conns", "-1"}, 0, "--db-max-conns"},
		{[]string{"--db-max-conns", "5000"}, 0, "--db-max-conns"},
	} {
		f, err := parseServeFlags(tc.args, io.Discard)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want one naming %s", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || f.dbMaxConns != tc.want {
			t.Errorf("%v: %d, %v; want %d", tc.args, f.dbMaxConns, err, tc.want)
		}
	}
}
