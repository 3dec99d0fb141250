package lanes

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpuportal/gpuportal/core/memest"
)

// TestProperties runs random sequences of submit, admit, schedule,
// release, request, grant, finish (with peaks that sometimes exceed the
// lane), hold, cancel and defragment on pools of every policy, and
// checks after every step that the safety condition holds on every GPU,
// lanes are sized to their largest E, and no two iterations of one lane
// overlap.
func TestProperties(t *testing.T) {
	configs := []Config{
		{Policy: Pack}, {Policy: Fair}, {Policy: SRTF},
		{Policy: Pack, Padding: memest.NoPadding, AgingS: 5},
		{Policy: Fair, AgingS: -1},
	}
	caps := [][]int64{{32}, {16, 24, 32}, {40, 40}}
	steps := 3000
	if testing.Short() {
		steps = 500
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		cfg := configs[int(seed)%len(configs)]
		x := newExerciser(t, caps[int(seed)%len(caps)], cfg)
		for range steps {
			// Weight the mix towards the iteration cycle.
			op := byte(rng.IntN(12))
			if rng.IntN(3) == 0 {
				op = byte(5 + rng.IntN(3))
			}
			x.step(op, byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)))
		}
	}
}

// FuzzLanes runs the operations the fuzzer's bytes spell (four bytes a
// step) on a pool of three GPUs and checks the invariants after each.
// Run it with: go test -fuzz FuzzLanes ./core/lanes
func FuzzLanes(f *testing.F) {
	f.Add([]byte{0, 5, 9, 0, 0, 7, 20, 0, 2, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 11, 3, 0, 0, 7, 0, 40, 0})
	f.Add([]byte{0, 1, 30, 0, 0, 1, 30, 0, 0, 2, 30, 0, 3, 0, 0, 0, 3, 1, 0, 0, 3, 2, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0, 10, 0, 0, 0})
	f.Add([]byte{8, 0, 0, 0, 8, 1, 0, 0, 0, 20, 20, 3, 2, 0, 0, 0, 11, 49, 0, 0, 2, 0, 0, 0, 8, 0, 0, 0, 9, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4*400 {
			data = data[:4*400]
		}
		cfg := Config{Policy: Policies()[len(data)%3]}
		if len(data)%2 == 1 {
			cfg.Padding, cfg.AgingS = memest.NoPadding, 3
		}
		x := newExerciser(t, []int64{24, 32, 48}, cfg)
		for len(data) >= 4 {
			x.step(data[0], data[1], data[2], data[3])
			data = data[4:]
		}
	})
}

// TestDeterministic: the same operations give the same lanes, grants and
// placements, step for step.
func TestDeterministic(t *testing.T) {
	run := func() []string {
		rng := rand.New(rand.NewPCG(42, 42))
		x := newExerciser(t, []int64{16, 24, 32}, Config{Policy: Fair, AgingS: 20})
		var out []string
		for range 2000 {
			x.step(byte(rng.IntN(12)), byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)))
			out = append(out, fmt.Sprint(x.p.View(), x.p.Waiting()))
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("step %d differs:\n%s\n%s", i, a[i], b[i])
		}
	}
}
