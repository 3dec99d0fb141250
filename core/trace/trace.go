// Package trace reads cluster job traces and cluster descriptions for the
// simulator.
//
// Three job formats are understood: the Tiresias simulator's CSV
// (FormatTiresias), the Alibaba openb pod list (FormatOpenB) and
// gpuportal's own CSV (FormatNative), a superset that carries team, user,
// model, GPU memory, CPU and host memory per job. Readers refuse what they
// cannot read: a bad row is an error naming the file, the line and the
// column, never a silent guess.
package trace

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strings"
)

// Job is one job of a trace. Times are in seconds.
type Job struct {
	// ID identifies the job; unique within a trace.
	ID int64
	// Name is the job's name in the source (a pod name, a job id).
	Name string
	// Submit is when the job arrived.
	Submit float64
	// Duration is how long the job runs once it holds its GPUs.
	Duration float64
	// GPUs is how many GPUs the job needs, all at once.
	GPUs int
	// GPUMilli is the share of each GPU the job uses, in thousandths:
	// 1000 for a whole GPU, less for a job that could share one.
	GPUMilli int
	// GPUMemMiB is the memory the job needs on each GPU; 0 when unknown.
	GPUMemMiB int64
	// CPUMilli is the CPU the job asks for, in thousandths of a core.
	CPUMilli int64
	// MemMiB is the host memory the job asks for.
	MemMiB int64
	Team   string
	User   string
	Model  string
	// Batch is the job's batch size, 0 when unknown (native traces).
	Batch int
	// CPUCurve and MemCurve are the job's sensitivity to CPUs and host
	// memory per GPU, as ParseCurve reads them ("0:0;3:0.42;12:1"), ""
	// when not given (native traces; see docs/synergy.md).
	CPUCurve string
	MemCurve string
	// TimeLimitS is the time limit the job declared, seconds; 0: none
	// (native traces; the simulator's --limits-as-hints reads it).
	TimeLimitS float64
	// Class is the job's class (native traces, the column class): ""
	// or "batch" for a batch job, "session" for an interactive session,
	// which the scheduler never demotes nor preempts for a batch job
	// (sched.Class).
	Class string
}

// Format names a trace file format.
type Format string

// The trace formats Read understands.
const (
	FormatTiresias Format = "tiresias"
	FormatOpenB    Format = "openb"
	FormatNative   Format = "native"
)

// Formats lists the formats Read understands.
func Formats() []Format { return []Format{FormatTiresias, FormatOpenB, FormatNative} }

// formatList names the formats for error messages.
const formatList = "tiresias, openb, native"

// Trace is a parsed job trace.
type Trace struct {
	// Name is where the trace came from, a file name as given.
	Name   string
	Format Format
	// Jobs are in file order.
	Jobs []Job
	// Skipped counts rows left out on purpose, by reason (for example
	// CPU-only pods of an openb trace). Bad rows are errors, not skips.
	Skipped map[string]int
}

// ParseFormat checks a format name; the empty name means "detect".
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case "", FormatTiresias, FormatOpenB, FormatNative:
		return f, nil
	}
	return "", fmt.Errorf("unknown trace format %q (known: %s)", s, formatList)
}

// DetectFormat guesses nothing: it names the format whose required
// columns the header line carries, and fails when none or several match.
func DetectFormat(header []string) (Format, error) {
	cols := make(map[string]bool, len(header))
	for _, h := range header {
		cols[normalizeColumn(h)] = true
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if !cols[n] {
				return false
			}
		}
		return true
	}
	var found []Format
	if has(tiresiasRequired...) {
		found = append(found, FormatTiresias)
	}
	if has(openbRequired...) {
		found = append(found, FormatOpenB)
	}
	if has(nativeRequired...) {
		found = append(found, FormatNative)
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return "", fmt.Errorf("header %q matches no trace format; name the format (%s)", strings.Join(header, ","), formatList)
	}
	return "", fmt.Errorf("header %q matches several trace formats %v; name the format", strings.Join(header, ","), found)
}

// Read parses a trace in format f from r; name is used in error messages.
// An empty f detects the format from the header line.
func Read(r io.Reader, name string, f Format) (*Trace, error) {
	if f == "" {
		sized, isSized := r.(sizedReader)
		br := bufio.NewReader(r)
		skipped, line, err := firstRecordLine(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		header, err := csv.NewReader(strings.NewReader(line)).Read()
		if err != nil {
			return nil, fmt.Errorf("%s: header: %w", name, err)
		}
		if f, err = DetectFormat(header); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		// Replay what was read so that line numbers stay true.
		switch {
		case isSized && sized.data != nil:
			// The whole file is at hand: read it again from its start.
			r = sizedReader{Reader: bytes.NewReader(sized.data), rows: sized.rows, data: sized.data}
		case isSized:
			r = sizedReader{Reader: io.MultiReader(bytes.NewReader(skipped), strings.NewReader(line), br), rows: sized.rows}
		default:
			r = io.MultiReader(bytes.NewReader(skipped), strings.NewReader(line), br)
		}
	}
	switch f {
	case FormatTiresias:
		return ReadTiresias(r, name)
	case FormatOpenB:
		return ReadOpenB(r, name)
	case FormatNative:
		return ReadNative(r, name)
	}
	return nil, fmt.Errorf("%s: unknown trace format %q (known: %s)", name, f, formatList)
}

// ReadFile opens path and reads it as a trace in format f ("" detects it).
// It reads the whole file first, to size the job list by its lines.
func ReadFile(path string, f Format) (*Trace, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w", err)
	}
	return Read(sizedReader{Reader: bytes.NewReader(data), rows: rowsHint(data), data: data}, path, f)
}

// sizedReader is a trace whose rows were counted beforehand, so that
// its reader sizes the job list once instead of growing it row by row.
type sizedReader struct {
	io.Reader
	rows int
	// data is the whole file, which Reader reads from its start, when
	// it is at hand (ReadFile): a table then splits its lines itself
	// unless encoding/csv's rules for quotes and carriage returns apply
	// (plainCSV). Nothing writes it once read: the table's fields, and
	// the strings of the jobs read, are slices of it.
	data []byte
}

// rowsHint guesses how many rows data holds: its lines, but no more than
// one per minRowBytes bytes nor maxRowsHint, so that a file of blank lines
// costs no more than its rows.
func rowsHint(data []byte) int {
	return min(bytes.Count(data, []byte{'\n'})+1, len(data)/minRowBytes, maxRowsHint)
}

const (
	minRowBytes = 8 // "1,1,0,0" and its newline: four required columns
	maxRowsHint = 1 << 20
)

// firstRecordLine returns the first line that is neither blank nor a
// '#' comment (the header), and the lines before it.
func firstRecordLine(br *bufio.Reader) (skipped []byte, header string, err error) {
	var before bytes.Buffer
	for {
		line, err := br.ReadString('\n')
		t := strings.TrimSpace(strings.TrimPrefix(line, "\ufeff"))
		if t != "" && !strings.HasPrefix(t, "#") {
			return before.Bytes(), line, nil
		}
		before.WriteString(line)
		if err == io.EOF {
			return nil, "", fmt.Errorf("empty trace: no header line")
		}
		if err != nil {
			return nil, "", fmt.Errorf("read header: %w", err)
		}
	}
}
