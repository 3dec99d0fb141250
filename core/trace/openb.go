package trace

import (
	"io"
	"strings"
)

// openbRequired are the columns of the openb pod list a job needs.
var openbRequired = []string{"name", "num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time"}

// Reasons ReadOpenB gives in Trace.Skipped.
const (
	SkipCPUOnly        = "cpu-only pod"
	SkipNeverScheduled = "pod never scheduled"
)

// ReadOpenB parses the Alibaba openb pod list (cluster-trace-gpu-v2023):
// name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
// creation_time,deletion_time,scheduled_time.
//
// Only GPU pods become jobs: a pod with num_gpu 0 is skipped, and so is a
// Pending pod with no scheduled_time, which never ran and so has no
// duration to replay; both are counted in Trace.Skipped. A job's submit
// time is creation_time and its duration deletion_time - scheduled_time.
// gpu_milli, cpu_milli and memory_mib are kept for sharing and CPU-aware
// simulation; a pod asking for a fraction of one GPU still counts as one
// GPU where the simulator counts whole GPUs. IDs are the 0-based index of
// the pod among all rows of the file.
func ReadOpenB(r io.Reader, name string) (*Trace, error) {
	t, err := openTable(r, name)
	if err != nil {
		return nil, err
	}
	if err := t.require(openbRequired...); err != nil {
		return nil, err
	}
	tr := &Trace{Name: name, Format: FormatOpenB, Skipped: map[string]int{}, Jobs: make([]Job, 0, t.rows)}
	index := int64(-1)
	err = t.each(func(row row) error {
		index++
		j, skip, err := openbJob(row)
		if err != nil {
			return err
		}
		if skip != "" {
			tr.Skipped[skip]++
			return nil
		}
		j.ID = index
		tr.Jobs = append(tr.Jobs, j)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tr, checkNotEmpty(tr)
}

// openbJob converts one pod, or names why it is skipped.
func openbJob(row row) (j Job, skip string, err error) {
	j.Name = row.str("name")
	if j.Name == "" {
		return j, "", row.errorf("name", "empty value")
	}
	g, err := row.intIn("num_gpu", 0, maxGPUsPerJob)
	if err != nil {
		return j, "", err
	}
	milli, err := row.intIn("gpu_milli", 0, 1000)
	if err != nil {
		return j, "", err
	}
	if g == 0 {
		return j, SkipCPUOnly, nil
	}
	if milli == 0 {
		return j, "", row.errorf("gpu_milli", "0 for a pod with %d GPUs", g)
	}
	j.GPUs, j.GPUMilli = int(g), int(milli)
	if j.CPUMilli, err = row.optIntIn("cpu_milli", 0, 0, 1<<40); err != nil {
		return j, "", err
	}
	if j.MemMiB, err = row.optIntIn("memory_mib", 0, 0, 1<<40); err != nil {
		return j, "", err
	}
	if j.Submit, err = seconds(row, "creation_time"); err != nil {
		return j, "", err
	}
	if row.str("scheduled_time") == "" {
		if phase := row.str("pod_phase"); phase != "" && !strings.EqualFold(phase, "Pending") {
			return j, "", row.errorf("scheduled_time", "empty for a pod in phase %s", phase)
		}
		return j, SkipNeverScheduled, nil
	}
	scheduled, err := seconds(row, "scheduled_time")
	if err != nil {
		return j, "", err
	}
	deleted, err := seconds(row, "deletion_time")
	if err != nil {
		return j, "", err
	}
	if scheduled < j.Submit {
		return j, "", row.errorf("scheduled_time", "%v is before creation_time %v", scheduled, j.Submit)
	}
	if deleted < scheduled {
		return j, "", row.errorf("deletion_time", "%v is before scheduled_time %v", deleted, scheduled)
	}
	j.Duration = deleted - scheduled
	return j, "", nil
}
