package slurm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// ParseJobComp reads the job completion log that Slurm writes with
// JobCompType=jobcomp/filetxt, one line per finished job:
//
//	JobId=3 UserId=root(0) ... Name=gpuportal-7 JobState=FAILED ... EndTime=2026-11-22T18:19:25 NodeList=n1 ... ExitCode=3:0
//
// Times are in loc, the time zone of slurmctld. Lines it cannot read are
// skipped. The jobs come back as squeue would have reported them at their
// end.
func ParseJobComp(data []byte, loc *time.Location) []Job {
	var jobs []Job
	for _, line := range bytes.Split(data, []byte("\n")) {
		if j, ok := parseJobCompLine(string(line), loc); ok {
			jobs = append(jobs, j)
		}
	}
	return jobs
}

func parseJobCompLine(line string, loc *time.Location) (Job, bool) {
	f := jobCompFields(line)
	id, err := strconv.ParseInt(f["JobId"], 10, 64)
	if err != nil || id <= 0 || f["JobState"] == "" {
		return Job{}, false
	}
	j := Job{ID: id, Name: f["Name"], State: strings.ToUpper(f["JobState"]), Nodes: f["NodeList"], Partition: f["Partition"]}
	if user, _, ok := strings.Cut(f["UserId"], "("); ok {
		j.User = user
	}
	// ExitCode=CODE:SIGNAL
	codeText, sigText, _ := strings.Cut(f["ExitCode"], ":")
	code, err1 := strconv.Atoi(codeText)
	sig, err2 := strconv.Atoi(sigText)
	if err1 != nil || err2 != nil || code < 0 || code > 255 || sig < 0 || sig > 127 {
		return Job{}, false
	}
	if sig > 0 {
		j.WaitStatus = sig
	} else {
		j.WaitStatus = code << 8
	}
	for key, dst := range map[string]*time.Time{"SubmitTime": &j.SubmitTime, "StartTime": &j.StartTime, "EndTime": &j.EndTime} {
		if t, err := time.ParseInLocation("2006-01-02T15:04:05", f[key], loc); err == nil {
			*dst = t
		}
	}
	return j, true
}

// jobCompFields splits a line of KEY=VALUE words; a word without "=" is
// part of the value before it (a job name with spaces).
func jobCompFields(line string) map[string]string {
	f := make(map[string]string)
	last := ""
	for _, word := range strings.Fields(line) {
		key, value, ok := strings.Cut(word, "=")
		if !ok || key == "" {
			if last != "" {
				f[last] += " " + word
			}
			continue
		}
		f[key], last = value, key
	}
	return f
}

// jobCompTail is how much of the end of the job completion log is read;
// a variable for tests.
var jobCompTail int64 = 4 << 20

// ReadJobComp reads the jobs of the last few megabytes of the job
// completion log at path.
func ReadJobComp(path string, loc *time.Location) ([]Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("job completion log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("job completion log: %w", err)
	}
	off := max(st.Size()-jobCompTail, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return nil, fmt.Errorf("job completion log %s: %w", path, err)
	}
	if off > 0 {
		// The first line is likely cut.
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return ParseJobComp(data, loc), nil
}
