package memest

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// workloads is the measured figures' folder, seen from this package
// (testdata/workloads/README.md).
const workloads = "../../testdata/workloads"

// readCSV reads a workloads file as rows of named fields.
func readCSV(t *testing.T, name string) []map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(workloads, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, r := range rows[1:] {
		m := map[string]string{}
		for i, h := range rows[0] {
			m[h] = r[i]
		}
		out = append(out, m)
	}
	return out
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// find returns the catalogue's row for model and batch.
func find(model string, batch int) (Entry, bool) {
	for _, e := range catalogue {
		if e.Model == model && e.Batch == batch {
			return e, true
		}
	}
	return Entry{}, false
}

// TestCatalogueMatchesWorkloads checks the embedded figures against the
// files they were derived from: salus-memory.csv's training rows as they
// are, and cnn-peak-memory.csv's peaks as P + E (overfeat left out, vgg
// taken from salus-memory.csv).
func TestCatalogueMatchesWorkloads(t *testing.T) {
	for _, r := range readCSV(t, "salus-memory.csv") {
		if r["phase"] != "train" {
			continue
		}
		model, batch := r["model"], 0
		if b, err := strconv.Atoi(r["batch"]); err == nil {
			batch = b
		} else {
			model += "-" + r["batch"] // seq2seq small, medium, large
		}
		e, ok := find(model, batch)
		if !ok {
			t.Errorf("salus-memory.csv %s batch %d: not in the catalogue", model, batch)
			continue
		}
		if e.PersistentMiB != num(t, r["persistent_mib"]) || e.EphemeralMiB != num(t, r["ephemeral_mib"]) {
			t.Errorf("%s batch %d: catalogue %+v, file P %s E %s", model, batch, e, r["persistent_mib"], r["ephemeral_mib"])
		}
	}
	for _, r := range readCSV(t, "cnn-peak-memory.csv") {
		model := r["model"]
		batch := int(num(t, r["batch"]))
		if model == "overfeat" || model[:3] == "vgg" {
			continue
		}
		e, ok := find(model, batch)
		if !ok {
			t.Errorf("cnn-peak-memory.csv %s batch %d: not in the catalogue", model, batch)
			continue
		}
		if peak := num(t, r["peak_mib"]); math.Abs(e.PersistentMiB+e.EphemeralMiB-peak) > 0.11 {
			t.Errorf("%s batch %d: P + E = %.1f, peak %.1f", model, batch, e.PersistentMiB+e.EphemeralMiB, peak)
		}
	}
}

// TestCatalogueShape: sorted by model then batch, no duplicates, and E
// never shrinks as the batch grows.
func TestCatalogueShape(t *testing.T) {
	for i := 1; i < len(catalogue); i++ {
		a, b := catalogue[i-1], catalogue[i]
		if a.Model > b.Model || (a.Model == b.Model && a.Batch >= b.Batch) {
			t.Fatalf("catalogue out of order at %+v, %+v", a, b)
		}
		if a.Model == b.Model && b.EphemeralMiB < a.EphemeralMiB {
			t.Errorf("%s: E falls from %v at %d to %v at %d", a.Model, a.EphemeralMiB, a.Batch, b.EphemeralMiB, b.Batch)
		}
	}
}
