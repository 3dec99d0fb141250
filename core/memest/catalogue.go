package memest

import (
	"math"
	"sort"
	"strings"
)

// Entry is one measured model and batch size of the catalogue, in MiB.
type Entry struct {
	Model         string
	Batch         int
	PersistentMiB float64
	EphemeralMiB  float64
}

// catalogue holds the built-in figures, sorted by model then batch.
//
// vgg11/16/19, seq2seq, superres, vae and mnist-conv: P and E exactly as
// the Salus clients declared them after offline profiling, the training
// rows of shared/workloads/salus-memory.csv. seq2seq is sized small,
// medium and large rather than by batch: those are separate models here
// with batch 0 (any batch).
//
// resnet50/101/152, inception3/4: shared/workloads/cnn-peak-memory.csv
// gives only the peak (P + E). Its peaks grow linearly with the batch
// size, so a least-squares line peak = P + k*batch per model gives P as
// the intercept (214.3, 359.7, 479.3, 197.8 and 332.3 MiB: within 10% of
// 8 bytes per parameter, the weights and gradients of plain SGD, which
// tf_cnn_benchmarks ran), and E = peak - P at each measured batch.
//
// alexnet, googlenet: their peaks are not linear in the batch size, so P
// is 8 bytes per parameter (61.1 M and 6.8 M) and E = peak - P.
//
// overfeat is left out: its peaks (3,255, 3,416, 6,240 MiB at 25, 50,
// 100) fit no such split. vgg at batch 100 in cnn-peak-memory.csv is a
// different setup from salus-memory.csv; the latter, which splits P and
// E, is used.
var catalogue = []Entry{
	{"alexnet", 25, 466.2, 220.4},
	{"alexnet", 50, 466.2, 688.6},
	{"alexnet", 100, 466.2, 930.3},
	{"googlenet", 25, 51.9, 704.2},
	{"googlenet", 50, 51.9, 1359.5},
	{"googlenet", 100, 51.9, 2482.2},
	{"inception3", 25, 197.8, 2301.8},
	{"inception3", 50, 197.8, 4577.5},
	{"inception3", 100, 197.8, 9181.2},
	{"inception4", 25, 332.3, 4112.8},
	{"inception4", 50, 332.3, 8208.2},
	{"inception4", 75, 332.3, 12329.7},
	{"mnist-conv", 25, 38, 62},
	{"mnist-conv", 50, 58, 70},
	{"mnist-conv", 100, 112, 70},
	{"resnet101", 25, 359.7, 2877.8},
	{"resnet101", 50, 359.7, 5746.1},
	{"resnet101", 75, 359.7, 8628.7},
	{"resnet152", 25, 479.3, 4083.7},
	{"resnet152", 50, 479.3, 8158.0},
	{"resnet152", 75, 479.3, 12246.4},
	{"resnet50", 25, 214.3, 1901.7},
	{"resnet50", 50, 214.3, 3793.9},
	{"resnet50", 75, 214.3, 5700.3},
	{"seq2seq-large", 0, 343.3, 5171},
	{"seq2seq-medium", 0, 80, 1034},
	{"seq2seq-small", 0, 18, 79.2},
	{"superres", 32, 17.5, 252.8},
	{"superres", 64, 31.7, 500},
	{"superres", 128, 60.4, 993},
	{"vae", 64, 21, 10},
	{"vae", 128, 22, 10},
	{"vae", 256, 23, 20},
	{"vgg11", 25, 1584.5, 5030.6},
	{"vgg11", 50, 1583.9, 8154.2},
	{"vgg11", 100, 1587.2, 11222.4},
	{"vgg16", 25, 1586.7, 5027.6},
	{"vgg16", 50, 1586.9, 8157.1},
	{"vgg16", 100, 1589.3, 10965.3},
	{"vgg19", 25, 1583.9, 5030.4},
	{"vgg19", 50, 1585.6, 8152.6},
	{"vgg19", 100, 1585.8, 10963.9},
}

// aliases maps normalized spellings to catalogue names.
var aliases = map[string]string{
	"inceptionv3": "inception3",
	"inceptionv4": "inception4",
	"mnist":       "mnist-conv",
}

// Entries lists the catalogue, sorted by model then batch size.
func Entries() []Entry { return append([]Entry(nil), catalogue...) }

// Lookup finds a model's estimate at a batch size. Case, dashes,
// underscores, dots and spaces in the name are ignored. Between two
// measured batch sizes E is interpolated linearly and P is the larger
// of the two; outside them E is scaled in proportion to the batch from
// the nearest measured one (activations grow with the batch) and P is
// that one's.
func Lookup(model string, batch int) (Estimate, bool) {
	rows := entriesOf(model)
	if len(rows) == 0 {
		return Estimate{}, false
	}
	if rows[0].Batch == 0 { // sized by name, any batch
		return estimateOf(rows[0].PersistentMiB, rows[0].EphemeralMiB), true
	}
	if batch <= 0 {
		return Estimate{}, false
	}
	i := sort.Search(len(rows), func(i int) bool { return rows[i].Batch >= batch })
	switch {
	case i < len(rows) && rows[i].Batch == batch:
		return estimateOf(rows[i].PersistentMiB, rows[i].EphemeralMiB), true
	case i == 0:
		r := rows[0]
		return estimateOf(r.PersistentMiB, r.EphemeralMiB*float64(batch)/float64(r.Batch)), true
	case i == len(rows):
		r := rows[len(rows)-1]
		return estimateOf(r.PersistentMiB, r.EphemeralMiB*float64(batch)/float64(r.Batch)), true
	}
	lo, hi := rows[i-1], rows[i]
	f := float64(batch-lo.Batch) / float64(hi.Batch-lo.Batch)
	p := max(lo.PersistentMiB, hi.PersistentMiB)
	return estimateOf(p, lo.EphemeralMiB+f*(hi.EphemeralMiB-lo.EphemeralMiB)), true
}

// entriesOf returns the rows of one model, sorted by batch size.
func entriesOf(model string) []Entry {
	key := normalize(model)
	if key == "" {
		return nil
	}
	if a, ok := aliases[key]; ok {
		key = normalize(a)
	}
	var out []Entry
	for _, e := range catalogue {
		if normalize(e.Model) == key {
			out = append(out, e)
		}
	}
	return out
}

func estimateOf(p, e float64) Estimate {
	return Estimate{int64(math.Ceil(p)), int64(math.Ceil(e)), Catalogue}
}

// normalize lowercases name and drops everything but letters and digits.
func normalize(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}
