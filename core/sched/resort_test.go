package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestResortSortsAsSortEntries gives resort a run of passes whose entries
// come and go and change keys, as a queue's do, and holds each order to
// sortEntries' over the same entries. Keys are drawn from few values so
// that ties, broken by the ID, are common.
func TestResortSortsAsSortEntries(t *testing.T) {
	for _, tc := range []struct {
		name           string
		n              int
		change, remove float64 // each entry's chance, per pass
		shuffle        bool    // entries out of ID order in some passes
		slots          bool    // uk is each entry's place by (k0, ID): it moves as entries leave
	}{
		{"quiet", 200, 0.01, 0.01, false, false},
		{"busy", 200, 0.3, 0.1, false, false},
		{"every key changes", 50, 1, 0, false, false},
		{"all leave", 30, 0, 1, false, false},
		{"out of order at times", 100, 0.1, 0.05, true, false},
		{"empty and one", 1, 0.5, 0.5, false, false},
		{"slots shift as entries leave", 300, 0.02, 0.05, false, true},
		{"slots shift, keys change", 300, 0.3, 0.1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(tc.n)))
			var r resort
			var ents []entry
			next := int64(1)
			for pass := 0; pass < 60; pass++ {
				// Leave, change, arrive; IDs ascend as a snapshot lists them.
				kept := ents[:0]
				for _, e := range ents {
					if rng.Float64() < tc.remove {
						continue
					}
					if rng.Float64() < tc.change {
						e = randomKeys(rng, e.id)
					}
					kept = append(kept, e)
				}
				ents = kept
				for len(ents) < tc.n && rng.IntN(3) > 0 {
					ents = append(ents, randomKeys(rng, next))
					next += 1 + int64(rng.IntN(3))
				}
				if tc.slots {
					// As userOrder hands out slots: each entry's uk is its
					// place by (k0, ID), so a departure shifts those behind.
					by := slices.Clone(ents)
					slices.SortFunc(by, func(a, b entry) int {
						if a.k0 != b.k0 {
							return int(a.k0 - b.k0)
						}
						return int(a.id - b.id)
					})
					place := map[int64]int32{}
					for k, e := range by {
						place[e.id] = int32(k)
					}
					for k := range ents {
						ents[k].fk, ents[k].k1, ents[k].k2, ents[k].k3, ents[k].uk = 0, 0, 0, 0, place[ents[k].id]
					}
				}
				slices.SortFunc(ents, func(a, b entry) int { return int(a.id - b.id) })
				in := slices.Clone(ents)
				if tc.shuffle && pass%5 == 4 {
					rng.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
				}
				want := slices.Clone(in)
				var idx []int32
				var scratch []entry
				sortEntries(want, &idx, &scratch)
				got := slices.Clone(in)
				r.sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("pass %d: %d entries ordered otherwise than sortEntries does", pass, len(in))
				}
			}
		})
	}
}

// randomKeys is an entry of job id with keys from a few values.
func randomKeys(rng *rand.Rand, id int64) entry {
	return entry{
		id: id,
		fk: float64(rng.IntN(2)), k0: float64(rng.IntN(3)), k1: float64(rng.IntN(4)),
		k2: float64(rng.IntN(2)), k3: float64(rng.IntN(2)), uk: int32(rng.IntN(2)),
		job: int32(id), gpus: int32(1 + rng.IntN(8)),
	}
}

// BenchmarkResort orders 10,000 waiting entries that 1% of change between
// passes, against sorting them whole (sortEntries).
func BenchmarkResort(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := make([]entry, 10000)
	for i := range base {
		base[i] = entry{id: int64(i + 1), k0: float64(rng.IntN(4)), k1: rng.Float64() * 1e6, job: int32(i)}
	}
	pass := func(i int) []entry {
		ents := slices.Clone(base)
		for k := 0; k < len(ents)/100; k++ {
			e := &ents[(i*7919+k*104729)%len(ents)]
			e.k1 = rng.Float64() * 1e6
		}
		return ents
	}
	// Slots: uk is each entry's place in the order, as userOrder gives
	// it; 1% of the entries leave each pass, shifting the places of the
	// entries behind them.
	slots := func(i int) []entry {
		ents := make([]entry, 0, len(base))
		for k, e := range base {
			if (k+i*7919)%100 != 0 {
				e.uk, e.k1 = int32(len(ents)), 0
				ents = append(ents, e)
			}
		}
		return ents
	}
	b.Run("slots/sortEntries", func(b *testing.B) {
		var idx []int32
		var scratch []entry
		for i := 0; b.Loop(); i++ {
			sortEntries(slots(i), &idx, &scratch)
		}
	})
	b.Run("slots/resort", func(b *testing.B) {
		var r resort
		for i := 0; b.Loop(); i++ {
			r.sort(slots(i))
		}
	})
	b.Run("sortEntries", func(b *testing.B) {
		var idx []int32
		var scratch []entry
		for i := 0; b.Loop(); i++ {
			ents := pass(i)
			sortEntries(ents, &idx, &scratch)
		}
	})
	b.Run("resort", func(b *testing.B) {
		var r resort
		for i := 0; b.Loop(); i++ {
			ents := pass(i)
			r.sort(ents)
		}
	})
}
