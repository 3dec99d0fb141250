// Package testarchive makes the archives of folders that the agents
// serve and the server keeps (a .tar.gz, one top folder, write times to
// the nanosecond), for tests of checkpoint copies.
package testarchive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"sort"
	"testing"
	"time"
)

// Folder is a .tar.gz of folder top holding files (name: content), every
// entry written at.
func Folder(t testing.TB, top string, files map[string]string, at time.Time) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: top + "/", Typeflag: tar.TypeDir, Mode: 0o700, ModTime: at, Format: tar.FormatPAX}); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		body := files[name]
		h := &tar.Header{Name: top + "/" + name, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(body)), ModTime: at, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
