package trace

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// nativeRequired are the columns every native trace has.
var nativeRequired = []string{"id", "submit_s", "duration_s", "gpus"}

// nativeColumns are all columns of the native format, in the order
// WriteNative writes them.
var nativeColumns = []string{"id", "name", "submit_s", "duration_s", "gpus", "gpu_milli",
	"gpu_mem_mib", "cpu_milli", "mem_mib", "team", "user", "model", "batch", "cpu_curve", "mem_curve", "time_limit_s", "class"}

// Classes are the values of the native column class: a job's class, as
// the scheduling core names them (sched.ParseClass); empty is batch.
var Classes = []string{"batch", "session"}

// ReadNative parses gpuportal's own trace CSV (see docs/simulator.md).
// The header names the columns, in any order; id, submit_s, duration_s
// and gpus are required, the others optional, and an unknown column is an
// error (a misspelt column would otherwise be silently dropped).
func ReadNative(r io.Reader, name string) (*Trace, error) {
	t, err := openTable(r, name)
	if err != nil {
		return nil, err
	}
	if err := t.require(nativeRequired...); err != nil {
		return nil, err
	}
	if err := t.only(nativeColumns); err != nil {
		return nil, err
	}
	tr := &Trace{Name: name, Format: FormatNative, Jobs: make([]Job, 0, t.rows)}
	ids := newIDSet(t.rows)
	err = t.each(func(row row) error {
		j, err := nativeJob(row)
		if err != nil {
			return err
		}
		if err := ids.add(row, "id", j.ID); err != nil {
			return err
		}
		tr.Jobs = append(tr.Jobs, j)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tr, checkNotEmpty(tr)
}

func nativeJob(row row) (Job, error) {
	var j Job
	var err error
	if j.ID, err = row.int("id"); err != nil {
		return j, err
	}
	if j.Submit, err = seconds(row, "submit_s"); err != nil {
		return j, err
	}
	if j.Duration, err = seconds(row, "duration_s"); err != nil {
		return j, err
	}
	g, err := row.intIn("gpus", 1, maxGPUsPerJob)
	if err != nil {
		return j, err
	}
	j.GPUs = int(g)
	milli, err := row.optIntIn("gpu_milli", 1000, 1, 1000)
	if err != nil {
		return j, err
	}
	j.GPUMilli = int(milli)
	if j.GPUMemMiB, err = row.optIntIn("gpu_mem_mib", 0, 0, 1<<40); err != nil {
		return j, err
	}
	if j.CPUMilli, err = row.optIntIn("cpu_milli", 0, 0, 1<<40); err != nil {
		return j, err
	}
	if j.MemMiB, err = row.optIntIn("mem_mib", 0, 0, 1<<40); err != nil {
		return j, err
	}
	j.Name = row.str("name")
	j.Team = row.str("team")
	j.User = row.str("user")
	j.Model = row.str("model")
	b, err := row.optIntIn("batch", 0, 0, 1<<30)
	if err != nil {
		return j, err
	}
	j.Batch = int(b)
	if j.CPUCurve, err = curveCell(row, "cpu_curve"); err != nil {
		return j, err
	}
	if j.MemCurve, err = curveCell(row, "mem_curve"); err != nil {
		return j, err
	}
	if row.str("time_limit_s") != "" {
		if j.TimeLimitS, err = seconds(row, "time_limit_s"); err != nil {
			return j, err
		}
	}
	if j.Class = row.str("class"); j.Class != "" && !slices.Contains(Classes, j.Class) {
		return j, row.errorf("class", "%q is no class: want %s, or empty for batch", j.Class, strings.Join(Classes, " or "))
	}
	return j, nil
}

// WriteNative writes jobs as a native trace, every column, header first.
// ReadNative reads back what it writes.
func WriteNative(w io.Writer, jobs []Job) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(nativeColumns); err != nil {
		return fmt.Errorf("write native trace: %w", err)
	}
	rec := make([]string, len(nativeColumns))
	for _, j := range jobs {
		rec = rec[:0]
		rec = append(rec,
			strconv.FormatInt(j.ID, 10), j.Name,
			formatSeconds(j.Submit), formatSeconds(j.Duration),
			strconv.Itoa(j.GPUs), milliText(j.GPUMilli),
			strconv.FormatInt(j.GPUMemMiB, 10), strconv.FormatInt(j.CPUMilli, 10),
			strconv.FormatInt(j.MemMiB, 10), j.Team, j.User, j.Model,
			batchText(j.Batch), j.CPUCurve, j.MemCurve, limitText(j.TimeLimitS), j.Class)
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("write native trace: job %d: %w", j.ID, err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write native trace: %w", err)
	}
	return nil
}

// limitText writes a time limit, empty for none.
func limitText(s float64) string {
	if s == 0 {
		return ""
	}
	return formatSeconds(s)
}

// formatSeconds writes the shortest text that parses back to v.
func formatSeconds(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// milliText writes a GPU share; 0, "unset", becomes an empty cell, which
// reads back as a whole GPU.
func milliText(m int) string {
	if m == 0 {
		return ""
	}
	return strconv.Itoa(m)
}

// batchText writes a batch size; 0, unknown, becomes an empty cell.
func batchText(b int) string {
	if b == 0 {
		return ""
	}
	return strconv.Itoa(b)
}
