package job

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseTimeLimit(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"", 0, false},
		{"0", 0, false},
		{"2h", 2 * time.Hour, false},
		{"90m", 90 * time.Minute, false},
		{"30", 30 * time.Minute, false},                   // minutes
		{"10:30", 10*time.Minute + 30*time.Second, false}, // MM:SS
		{"01:02:03", time.Hour + 2*time.Minute + 3*time.Second, false},
		{"1-00:00:00", 24 * time.Hour, false},
		{"2-12", 60 * time.Hour, false},
		{"1-02:30", 26*time.Hour + 30*time.Minute, false},
		{"-5m", 0, true},
		{"abc", 0, true},
		{"1:2:3:4", 0, true},
		{"400-00:00:00", 0, true}, // beyond MaxTimeLimit
		{"1-", 0, true},
	}
	for _, tc := range tests {
		got, err := ParseTimeLimit(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseTimeLimit(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
	if s := FormatTimeLimit(26*time.Hour + 5*time.Second); s != "1-02:00:05" {
		t.Errorf("FormatTimeLimit = %q", s)
	}
}

func TestParseEnv(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		err  string
	}{
		{"plain", []string{"LR=0.1", "EMPTY=", "WITH_EQ=a=b"}, ""},
		{"no equals", []string{"LR"}, "want NAME=VALUE"},
		{"reserved prefix", []string{"GPUPORTAL_JOB_ID=3"}, "set by gpuportal"},
		{"the job's GPUs", []string{"CUDA_VISIBLE_DEVICES=0"}, "set by gpuportal"},
		{"bad name", []string{"1X=2"}, "not a variable name"},
		{"dash in name", []string{"A-B=2"}, "not a variable name"},
		{"twice", []string{"A=1", "A=2"}, "given twice"},
		{"NUL", []string{"A=x\x00y"}, "NUL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEnv(tc.in)
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("ParseEnv(%q) = %v; want %q", tc.in, err, tc.err)
			}
		})
	}
}

func TestParseDependencies(t *testing.T) {
	got, err := ParseDependencies("afterok:41:42,afterany:7, after_failed:9")
	want := []Dependency{{AfterOK, 41}, {AfterOK, 42}, {AfterAny, 7}, {AfterFailed, 9}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"afterok", "afterok:x", "before:1", "afterok:-1"} {
		if _, err := ParseDependencies(bad); err == nil {
			t.Errorf("ParseDependencies(%q) accepted", bad)
		}
	}
	if s := (Dependency{AfterOK, 41}).String(); s != "afterok:41" {
		t.Errorf("String = %q", s)
	}
}

func TestDependencyCheck(t *testing.T) {
	tests := []struct {
		d            Dependency
		other        State
		wait, cancel bool
	}{
		{Dependency{AfterOK, 41}, Running, true, false},
		{Dependency{AfterOK, 41}, Succeeded, false, false},
		{Dependency{AfterOK, 41}, Failed, false, true},
		{Dependency{AfterOK, 41}, Cancelled, false, true},
		{Dependency{AfterOK, 41}, TimedOut, false, true},
		{Dependency{AfterAny, 41}, Queued, true, false},
		{Dependency{AfterAny, 41}, Failed, false, false},
		{Dependency{AfterFailed, 41}, Failed, false, false},
		{Dependency{AfterFailed, 41}, Succeeded, false, true},
	}
	for _, tc := range tests {
		w, c := tc.d.Check(tc.other)
		if (w != "") != tc.wait || (c != "") != tc.cancel {
			t.Errorf("%v with the other %s: wait %q cancel %q", tc.d, tc.other, w, c)
		}
	}
	if w, _ := (Dependency{AfterOK, 41}).Check(Queued); w != "waiting for job 41 to succeed" {
		t.Errorf("wait reason %q", w)
	}
}

func TestParseArray(t *testing.T) {
	tests := []struct {
		in    string
		want  []int
		limit int
		err   bool
	}{
		{"0-5%2", []int{0, 1, 2, 3, 4, 5}, 2, false},
		{"1,3,8-10", []int{1, 3, 8, 9, 10}, 0, false},
		{"0-9:3%4", []int{0, 3, 6, 9}, 4, false},
		{"3,1,3", []int{1, 3}, 0, false},
		{"5-2", nil, 0, true},
		{"0-5%0", nil, 0, true},
		{"%2", nil, 0, true},
		{"0-100000", nil, 0, true},
		{"x", nil, 0, true},
		{"4:2", nil, 0, true},
	}
	for _, tc := range tests {
		a, err := ParseArray(tc.in)
		if (err != nil) != tc.err || (!tc.err && (!reflect.DeepEqual(a.Indices, tc.want) || a.Limit != tc.limit)) {
			t.Errorf("ParseArray(%q) = %+v, %v", tc.in, a, err)
		}
	}
	if s := (ArraySpec{Indices: []int{0, 1, 2, 5}, Limit: 2}).String(); s != "0-2,5%2" {
		t.Errorf("String = %q", s)
	}
}

func TestParseParams(t *testing.T) {
	rows, err := ParseParams("LR, BATCH\n0.1,32\n0.01,\"64\"\n")
	want := [][]string{{"LR=0.1", "BATCH=32"}, {"LR=0.01", "BATCH=64"}}
	if err != nil || !reflect.DeepEqual(rows, want) {
		t.Fatalf("got %v, %v", rows, err)
	}
	for _, bad := range []string{"LR\n", "GPUPORTAL_X\n1\n", "LR,LR\n1,2\n", "LR,B\n1\n", "1A\n2\n"} {
		if _, err := ParseParams(bad); err == nil {
			t.Errorf("ParseParams(%q) accepted", bad)
		}
	}
}
