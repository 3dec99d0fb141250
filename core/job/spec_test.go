package job

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"syscall"
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
		// Kept in whole seconds: these would become 0, no limit, or lose
		// their fraction.
		{"1ns", 0, true},
		{"1.5s", 0, true},
		{"0.5m", 30 * time.Second, false},
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
		{"not UTF-8", []string{"A=x\xffy"}, "not valid UTF-8"},
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
	want := []Dependency{{Kind: AfterOK, JobID: 41}, {Kind: AfterOK, JobID: 42}, {Kind: AfterAny, JobID: 7}, {Kind: AfterFailed, JobID: 9}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
	many := "afterok" + strings.Repeat(":1", MaxDependencies+1)
	for _, bad := range []string{"afterok", "afterok:x", "before:1", "afterok:-1", many} {
		if _, err := ParseDependencies(bad); err == nil {
			t.Errorf("ParseDependencies(%q) accepted", bad)
		}
	}
	if s := (Dependency{Kind: AfterOK, JobID: 41}).String(); s != "afterok:41" {
		t.Errorf("String = %q", s)
	}
}

func TestDependencyCheck(t *testing.T) {
	tests := []struct {
		d            Dependency
		other        State
		wait, cancel bool
	}{
		{Dependency{Kind: AfterOK, JobID: 41}, Running, true, false},
		{Dependency{Kind: AfterOK, JobID: 41}, Succeeded, false, false},
		{Dependency{Kind: AfterOK, JobID: 41}, Failed, false, true},
		{Dependency{Kind: AfterOK, JobID: 41}, Cancelled, false, true},
		{Dependency{Kind: AfterOK, JobID: 41}, TimedOut, false, true},
		{Dependency{Kind: AfterAny, JobID: 41}, Queued, true, false},
		{Dependency{Kind: AfterAny, JobID: 41}, Failed, false, false},
		{Dependency{Kind: AfterFailed, JobID: 41}, Failed, false, false},
		{Dependency{Kind: AfterFailed, JobID: 41}, Succeeded, false, true},
	}
	for _, tc := range tests {
		w, c := tc.d.Check(tc.other)
		if (w != "") != tc.wait || (c != "") != tc.cancel {
			t.Errorf("%v with the other %s: wait %q cancel %q", tc.d, tc.other, w, c)
		}
	}
	if w, _ := (Dependency{Kind: AfterOK, JobID: 41}).Check(Queued); w != "waiting for job 41 to succeed" {
		t.Errorf("wait reason %q", w)
	}
	// An array's ID is named as the array: its first task (job 41) may
	// have succeeded while another failed ("job 41 ended failed" was
	// what the job's page and the API said of a succeeded job).
	arr := Dependency{Kind: AfterOK, JobID: 41, Array: true}
	if w, _ := arr.Check(Queued); w != "waiting for array 41 to succeed" {
		t.Errorf("array wait reason %q", w)
	}
	if _, c := arr.Check(Failed); c != "dependency never satisfied: a task of array 41 ended failed, and this job runs only after every task of it succeeds" {
		t.Errorf("array cancel reason %q", c)
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
		{"+5", nil, 0, true},
		{"1,,2", nil, 0, true},
		{"999999", []int{999999}, 0, false},
		{"999990-999999:9%1000", []int{999990, 999999}, 1000, false},
		{"0-999", nil, 0, false},
		{"0-1000", nil, 0, true},
		// Overlaps count as listed: 1001 tasks listed.
		{"0-999,0", nil, 0, true},
		{"1000000", nil, 0, true},
		{"0-5%1001", nil, 0, true},
		// The loop over a range used to wrap around at the largest int
		// (and 0-MaxInt64 overflowed the count of tasks): it never ended.
		{"9223372036854775807", nil, 0, true},
		{"0-9223372036854775807", nil, 0, true},
		{"9223372036854775806-9223372036854775807", nil, 0, true},
		{"0-9:9223372036854775807", nil, 0, true},
		{"0-5%9223372036854775807", nil, 0, true},
		{"0-5%-1", nil, 0, true},
		{strings.Repeat("1,", MaxArraySpecLen), nil, 0, true},
	}
	for _, tc := range tests {
		a, err := ParseArray(tc.in)
		if (err != nil) != tc.err || (!tc.err && tc.want != nil && (!reflect.DeepEqual(a.Indices, tc.want) || a.Limit != tc.limit)) {
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
	var wide strings.Builder // MaxEnv+1 columns
	for i := range MaxEnv + 1 {
		fmt.Fprintf(&wide, "V%d,", i)
	}
	for _, bad := range []string{"LR\n", "GPUPORTAL_X\n1\n", "LR,LR\n1,2\n", "LR,B\n1\n", "1A\n2\n",
		"LR\n\xff\n", strings.TrimSuffix(wide.String(), ",") + "\n", "LR\n" + strings.Repeat("x", MaxEnvBytes) + "\n"} {
		if _, err := ParseParams(bad); err == nil {
			t.Errorf("ParseParams(%q) accepted", bad)
		}
	}
}

// TestParseArrayBounded checks that arrays with numbers at the ends of
// int answer at once, with an error, and allocate little: the loop over
// a range used to wrap around at the largest int and grow without end.
func TestParseArrayBounded(t *testing.T) {
	for _, s := range []string{
		"9223372036854775807", "0-9223372036854775807", "9223372036854775806-9223372036854775807:1",
		"0-9223372036854775807:2", "18446744073709551615", "0-999999%1000",
	} {
		done := make(chan error, 1)
		var allocated uint64
		go func() {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := ParseArray(s)
			runtime.ReadMemStats(&after)
			allocated = after.TotalAlloc - before.TotalAlloc
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("ParseArray(%q) accepted", s)
			}
			if allocated > 1<<20 {
				t.Errorf("ParseArray(%q) allocated %d bytes", s, allocated)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ParseArray(%q) has not returned after 5 s", s)
		}
	}
}

func TestSignalOf(t *testing.T) {
	tests := []struct {
		reason string
		want   int
	}{
		{KilledBy(syscall.SIGKILL), 9},
		{KilledBy(syscall.SIGSEGV), 11},
		{"run 2: " + KilledBy(syscall.SIGTERM) + " on node-1; retried", 15},
		{"the container runtime's client was " + KilledBy(syscall.SIGINT), 2},
		{KilledBy(syscall.SIGTERM) + ", then " + KilledBy(syscall.SIGKILL), 9}, // the last one
		{"exited with code 143 on n0", 0},
		{"killed by signal ", 0},
		{"killed by signal 999", 0},
		{"", 0},
	}
	for _, tc := range tests {
		if got := SignalOf(tc.reason); got != tc.want {
			t.Errorf("SignalOf(%q) = %d, want %d", tc.reason, got, tc.want)
		}
	}
	if got, want := KilledBy(syscall.SIGKILL), "killed by signal 9 (killed)"; got != want {
		t.Errorf("KilledBy(SIGKILL) = %q, want %q", got, want)
	}
}
