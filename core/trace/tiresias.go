package trace

import (
	"io"
)

// tiresiasRequired are the columns of the Tiresias simulator's trace that
// carry meaning here; iterations and interval are ignored.
var tiresiasRequired = []string{"job_id", "num_gpu", "submit_time", "duration"}

// ReadTiresias parses the Tiresias simulator's CSV:
// job_id,num_gpu,submit_time,iterations,model_name,duration,interval.
// job_id must be a unique integer; submit_time and duration are seconds.
// Columns other than those four and model_name are ignored.
func ReadTiresias(r io.Reader, name string) (*Trace, error) {
	t, err := openTable(r, name)
	if err != nil {
		return nil, err
	}
	if err := t.require(tiresiasRequired...); err != nil {
		return nil, err
	}
	tr := &Trace{Name: name, Format: FormatTiresias, Jobs: make([]Job, 0, t.rows)}
	ids := newIDSet(t.rows)
	err = t.each(func(row row) error {
		j, err := tiresiasJob(row)
		if err != nil {
			return err
		}
		if err := ids.add(row, "job_id", j.ID); err != nil {
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

func tiresiasJob(row row) (Job, error) {
	var j Job
	var err error
	if j.ID, err = row.int("job_id"); err != nil {
		return j, err
	}
	j.Name = row.str("job_id")
	g, err := row.intIn("num_gpu", 1, maxGPUsPerJob)
	if err != nil {
		return j, err
	}
	j.GPUs = int(g)
	if j.Submit, err = seconds(row, "submit_time"); err != nil {
		return j, err
	}
	if j.Duration, err = seconds(row, "duration"); err != nil {
		return j, err
	}
	j.GPUMilli = 1000
	j.Model = row.str("model_name")
	return j, nil
}
