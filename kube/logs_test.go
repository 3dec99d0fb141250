package kube

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLogWriterResumes(t *testing.T) {
	// What the pod log API answers with timestamps=true: a first read cut
	// short, then a read resumed from the second of the last line, which
	// repeats the lines of that second already written.
	first := "2026-11-28T12:00:00.100000000Z step 1\n" +
		"2026-11-28T12:00:01.200000000Z step 2\n" +
		"2026-11-28T12:00:01.200000000Z step 2 again, same time\n"
	resumed := "2026-11-28T12:00:01.100000000Z before, same second\n" +
		"2026-11-28T12:00:01.200000000Z step 2\n" +
		"2026-11-28T12:00:01.200000000Z step 2 again, same time\n" +
		"2026-11-28T12:00:01.200000000Z a third at that time\n" +
		"2026-11-28T12:00:02.000000000Z step 3, no newline"
	var out bytes.Buffer
	w := &logWriter{w: &out, owned: func() bool { return true }}
	if err := w.copyFrom(strings.NewReader(first)); err != nil {
		t.Fatal(err)
	}
	if err := w.copyFrom(strings.NewReader(resumed)); err != nil {
		t.Fatal(err)
	}
	want := "step 1\nstep 2\nstep 2 again, same time\na third at that time\nstep 3, no newline"
	if out.String() != want {
		t.Fatalf("copied:\n%q\nwant:\n%q", out.String(), want)
	}
	if got := w.last.Format(time.RFC3339Nano); got != "2026-11-28T12:00:02Z" {
		t.Errorf("last time %s, want 2026-11-28T12:00:02Z", got)
	}
}

func TestLogWriterLongLinesAndNoTimestamps(t *testing.T) {
	long := strings.Repeat("x", 200<<10) // past the reader's buffer
	in := "2026-11-28T12:00:00Z " + long + "\n" +
		"not a timestamp line\n"
	var out bytes.Buffer
	w := &logWriter{w: &out, owned: func() bool { return true }}
	if err := w.copyFrom(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	if want := long + "\nnot a timestamp line\n"; out.String() != want {
		t.Fatalf("copied %d bytes, want %d", out.Len(), len(want))
	}
}

func TestLogWriterStopsForALaterRun(t *testing.T) {
	var out bytes.Buffer
	w := &logWriter{w: &out, owned: func() bool { return false }}
	if err := w.copyFrom(strings.NewReader("2026-11-28T12:00:00Z hello\n")); err != errNotOwner {
		t.Fatalf("err %v, want errNotOwner", err)
	}
	if out.Len() != 0 {
		t.Errorf("wrote %q for an earlier run", out.String())
	}
}

func TestLogPath(t *testing.T) {
	for _, tc := range []struct {
		rank int
		want string
	}{{0, "/d/42/output.log"}, {3, "/d/42/output.r3.log"}} {
		if got := logPath("/d", 42, tc.rank); got != tc.want {
			t.Errorf("logPath rank %d = %s, want %s", tc.rank, got, tc.want)
		}
	}
}
