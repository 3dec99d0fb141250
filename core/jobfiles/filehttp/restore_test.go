package filehttp

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/jobfiles"
)

// TestRestoreRoundTrip: a folder archived on one machine and restored on
// another replaces what was there, files dated as they were written, a
// link kept as a link.
func TestRestoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	from, fromDir := fixture(t)
	written := time.Date(2026, 11, 30, 7, 21, 52, 310e6, time.UTC)
	must(t, os.Chtimes(filepath.Join(fromDir, "checkpoint", "step-2", "model.pt"), written, written))
	a, err := from.Archive(ctx, jobfiles.JobRoot, "checkpoint")
	must(t, err)
	var arc bytes.Buffer
	_, err = io.Copy(&arc, a.Body)
	a.Body.Close()
	must(t, err)

	to, toDir := fixture(t)
	must(t, os.WriteFile(filepath.Join(toDir, "checkpoint", "stale.pt"), []byte("old"), 0o600))
	sum, err := to.Restore(ctx, jobfiles.JobRoot, "checkpoint", bytes.NewReader(arc.Bytes()))
	must(t, err)
	if sum.Files != 1 || sum.Bytes != int64(len("weights")) {
		t.Errorf("restored %+v, want 1 file of 7 bytes", sum)
	}
	model := filepath.Join(toDir, "checkpoint", "step-2", "model.pt")
	b, err := os.ReadFile(model)
	must(t, err)
	fi, err := os.Stat(model)
	must(t, err)
	if string(b) != "weights" || !fi.ModTime().Equal(written) {
		t.Errorf("model.pt: %q written %v, want %q written %v", b, fi.ModTime(), "weights", written)
	}
	if _, err := os.Stat(filepath.Join(toDir, "checkpoint", "stale.pt")); !os.IsNotExist(err) {
		t.Errorf("the folder's old file is still there (%v): a restore replaces the folder", err)
	}
	if l, err := os.Readlink(filepath.Join(toDir, "checkpoint", "latest")); err != nil || l != "step-2" {
		t.Errorf("latest: %q, %v; want a link to step-2", l, err)
	}
	left, _ := filepath.Glob(filepath.Join(toDir, ".checkpoint.*"))
	if len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}

	// A folder that does not exist yet is made.
	must(t, os.RemoveAll(filepath.Join(toDir, "checkpoint")))
	_, err = to.Restore(ctx, jobfiles.JobRoot, "checkpoint", bytes.NewReader(arc.Bytes()))
	must(t, err)
	if _, err := os.Stat(model); err != nil {
		t.Errorf("restore into a missing folder: %v", err)
	}
}

// tarGz is an archive of the given entries.
func tarGz(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range hdrs {
		body := h.Linkname
		if h.Typeflag == tar.TypeReg {
			h.Linkname, h.Size = "", int64(len(body))
		}
		must(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte(body))
			must(t, err)
		}
	}
	must(t, tw.Close())
	must(t, zw.Close())
	return buf.Bytes()
}

// TestRestoreRefusals: a broken or hostile archive leaves the folder as
// it was and nothing beside it.
func TestRestoreRefusals(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		path string
		body []byte
		kind jobfiles.Kind
	}{
		{"not gzip", "checkpoint", []byte("plain text"), jobfiles.Invalid},
		{"climbs out", "checkpoint", tarGz(t, &tar.Header{Name: "checkpoint/../../secret", Typeflag: tar.TypeReg, Linkname: "x", Mode: 0o600}), jobfiles.Invalid},
		{"over the limit", "checkpoint", tarGz(t, &tar.Header{Name: "checkpoint/big", Typeflag: tar.TypeReg, Linkname: strings.Repeat("x", 2<<20), Mode: 0o600}), jobfiles.TooLarge},
		{"a file", "output.log", tarGz(t, &tar.Header{Name: "c/a", Typeflag: tar.TypeReg, Linkname: "x", Mode: 0o600}), jobfiles.Invalid},
		{"the root", "", tarGz(t, &tar.Header{Name: "c/a", Typeflag: tar.TypeReg, Linkname: "x", Mode: 0o600}), jobfiles.Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, dir := fixture(t)
			_, err := c.Restore(ctx, jobfiles.JobRoot, tc.path, bytes.NewReader(tc.body))
			if kind(err) != tc.kind {
				t.Fatalf("err %v (kind %q), want kind %q", err, kind(err), tc.kind)
			}
			b, err := os.ReadFile(filepath.Join(dir, "checkpoint", "step-2", "model.pt"))
			if err != nil || string(b) != "weights" {
				t.Errorf("the folder changed: %q, %v", b, err)
			}
			left, _ := filepath.Glob(filepath.Join(dir, ".*"))
			if len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(dir)), "secret")); err != nil {
				t.Errorf("the secret outside: %v", err)
			}
		})
	}
}
