package sim

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"strings"
	"testing"
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
