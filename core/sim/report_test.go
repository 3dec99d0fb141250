package sim

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/core/trace"
)

func sampleResults() []*Result {
	return []*Result{
		{Policy: "fifo", Jobs: 3, Finished: 3, AvgJCT: 116.7, JCTs: []float64{100, 110, 140}},
		{Policy: "tiresias-l", Jobs: 3, Finished: 3, AvgJCT: 90, JCTs: []float64{0.5, 30, 140}},
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"policy", "jobs", "finished", "avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s",
		"avg_pending_s", "makespan_s", "preemptions", "gpu_utilization", "wall_s"}
	if len(got) != 2 {
		t.Fatalf("%d objects, want 2", len(got))
	}
	for _, k := range want {
		if _, ok := got[0][k]; !ok {
			t.Errorf("key %s missing from %s", k, b.String())
		}
	}
	if _, ok := got[0]["JCTs"]; ok {
		t.Error("per-job JCTs leak into the JSON")
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "avg JCT s") || !strings.Contains(lines[2], "tiresias-l") {
		t.Fatalf("table:\n%s", b.String())
	}
}

// TestWriteCDF checks that the picture is well-formed SVG with a line and
// a legend entry per policy and labelled axes.
func TestWriteCDF(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCDF(&b, sampleResults(), "JCT <CDF> & more"); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&b)
	polylines, texts := 0, []string{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if el.Name.Local == "polyline" {
				polylines++
			}
		case xml.CharData:
			texts = append(texts, string(el))
		}
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"JCT <CDF> & more", "fifo (avg 1.9 min)", "tiresias-l (avg 1.5 min)", "log scale", "1 s", "1 min", "fraction of jobs"} {
		if !strings.Contains(all, want) {
			t.Errorf("text %q missing from %s", want, all)
		}
	}
	if polylines != 2 {
		t.Errorf("%d lines, want 2", polylines)
	}
}

func TestWriteCDFWithoutJobs(t *testing.T) {
	if err := WriteCDF(io.Discard, []*Result{{Policy: "fifo"}}, "t"); err == nil {
		t.Fatal("no error for a picture with nothing to draw")
	}
}

// TestPendingByGPUs: the starvation measure groups the finished jobs'
// pending times by GPUs asked, and the table prints one row per size.
func TestPendingByGPUs(t *testing.T) {
	// One 8-GPU node: a 4-GPU job holds half of it until 100; two 1-GPU
	// jobs start at once; the 8-GPU job waits for all of them.
	jobs := []trace.Job{gj(1, 0, 4, 100), gj(2, 0, 1, 50), gj(3, 10, 1, 200), gj(4, 5, 8, 10)}
	r, _ := run(t, jobs, "1x8", Config{Sched: sched.Config{Policy: "fjf"}})
	want := []PendingByGPUs{
		{GPUs: 1, Jobs: 2, AvgS: 0, P99S: 0, MaxS: 0},
		{GPUs: 4, Jobs: 1, AvgS: 0, P99S: 0, MaxS: 0},
		{GPUs: 8, Jobs: 1, AvgS: 205, P99S: 205, MaxS: 205},
	}
	if !reflect.DeepEqual(r.Pending, want) {
		t.Fatalf("pending %+v, want %+v", r.Pending, want)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, []*Result{r}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "max pending s") || !strings.Contains(b.String(), "205") {
		t.Errorf("table without the pending rows:\n%s", b.String())
	}
}
