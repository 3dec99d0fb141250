// Package joboutput keeps a copy of a job's output that arrives in
// chunks at offsets, as remote agents send it to the server.
package joboutput

import (
	"fmt"
	"os"
	"strings"
)

// WriteChunk writes data at offset of the copy at path, creating it. A
// chunk beyond the copy's end means that the bytes between were lost
// (the disk was full when they came): the gap is filled with a marker
// line of exactly its length, so that the reader sees that output is
// missing and how much, and every later byte stays at its offset in the
// agent's own file (from which the copy resumes after a reconnection).
func WriteChunk(path string, offset int64, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	if gap := offset - fi.Size(); gap > 0 {
		if _, err := f.WriteAt([]byte(Marker(gap)), fi.Size()); err != nil {
			f.Close()
			return fmt.Errorf("mark %d lost bytes: %w", gap, err)
		}
	}
	if _, err := f.WriteAt(data, offset); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Marker is the text that stands for n lost bytes: n bytes long, a line
// of its own when n allows, padded with spaces.
func Marker(n int64) string {
	for _, m := range []string{
		fmt.Sprintf("\n[gpuportal: %d bytes of output lost: the server could not save them (disk full?)]", n),
		fmt.Sprintf("\n[gpuportal: %d bytes lost]", n),
		"[lost]",
	} {
		if int64(len(m))+1 <= n {
			return m + strings.Repeat(" ", int(n)-len(m)-1) + "\n"
		}
	}
	return strings.Repeat("~", int(n))
}
