package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/sched"
)

// reasonsModel is what recordReasons stores, written plainly: a map of
// each job's stored reason with the last call among whose waits the job
// was (the engine's before reasonBook).
type reasonsModel struct {
	stored map[int64]modelReason
	call   uint64
	atOnce int
}

type modelReason struct {
	text string
	at   time.Time
	seen uint64
}

func (m *reasonsModel) record(waits []sched.Wait, now time.Time, fail bool) map[int64]string {
	m.call++
	changed := make(map[int64]string)
	for _, w := range waits {
		if old, ok := m.stored[w.JobID]; ok && old.seen+1 >= m.call {
			fresh := now.Sub(old.at) < refreshAfter(w.JobID)
			if fresh && w.Position > m.atOnce || old.text == w.Reason || fresh && sameWords(old.text, w.Reason) {
				old.seen = m.call
				m.stored[w.JobID] = old
				continue
			}
		}
		changed[w.JobID] = w.Reason
	}
	if !fail {
		for id, r := range changed {
			m.stored[id] = modelReason{text: r, at: now, seen: m.call}
		}
	}
	return changed
}

// setReasonsLog keeps what each SetReasons was given, and fails it while
// fail is set.
type setReasonsLog struct {
	*memStore
	last map[int64]string
	fail bool
}

func (s *setReasonsLog) SetReasons(ctx context.Context, reasons map[int64]string) error {
	s.last = maps.Clone(reasons)
	if s.fail {
		return errors.New("database down")
	}
	return s.memStore.SetReasons(ctx, reasons)
}

// TestReasonBookAsAMap: recordReasons stores the same reasons as the
// plain map of reasonsModel, call after call, however the waits change
// between calls: jobs leave and join anywhere in the line, the line is
// shuffled, a job starts (its stored reason dropped), the store fails,
// the queue is long or empty, job IDs are dense or far apart.
func TestReasonBookAsAMap(t *testing.T) {
	words := []string{"needs 1 GPU; 0 free;", "needs 1 GPU on one node;", "held by its team's cap;"}
	for seed := range uint64(100) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			mem := newMemStore()
			e, clock := newTestEngine(t, mem, newFakeNode("n0", 1))
			e.reasonsAtOnce = 1 + rng.IntN(20)
			store := &setReasonsLog{memStore: mem}
			e.cfg.Store = store
			model := &reasonsModel{stored: make(map[int64]modelReason), atOnce: e.reasonsAtOnce}
			spread := int64(1 + rng.IntN(1000)) // the span between two jobs' IDs
			next := int64(1)
			var line []int64
			for call := range 60 {
				// The line changes as a cluster's does.
				switch k := rng.IntN(10); {
				case k < 4: // the first few start, a few join the end
					line = line[min(len(line), rng.IntN(4)):]
					for range rng.IntN(4) {
						line = append(line, next*spread)
						next++
					}
				case k < 6: // a few leave anywhere, one joins anywhere
					for range rng.IntN(3) {
						if len(line) > 0 {
							i := rng.IntN(len(line))
							line = slices.Delete(line, i, i+1)
						}
					}
					line = slices.Insert(line, rng.IntN(len(line)+1), next*spread)
					next++
				case k < 7: // shuffled
					rng.Shuffle(len(line), func(i, j int) { line[i], line[j] = line[j], line[i] })
				case k < 8: // a burst of submissions
					for range rng.IntN(300) {
						line = append(line, next*spread)
						next++
					}
				case k < 9 && len(line) > 0: // one starts between passes
					id := line[rng.IntN(len(line))]
					e.reasons.forget(id)
					delete(model.stored, id)
				}
				waits := make([]sched.Wait, len(line))
				for i, id := range line {
					waits[i] = sched.Wait{JobID: id, Position: i + 1,
						Reason: fmt.Sprintf("%s %d jobs ahead", words[(int(id)+call/20)%len(words)], i)}
				}
				store.fail = rng.IntN(10) == 0
				clock.t = clock.t.Add(time.Duration(rng.IntN(20)) * time.Second)
				want := model.record(waits, clock.t, store.fail)
				err := e.recordReasons(context.Background(), waits, clock.t)
				if (err != nil) != store.fail {
					t.Fatalf("call %d: err %v with the store failing %v", call, err, store.fail)
				}
				if !maps.Equal(store.last, want) {
					t.Fatalf("call %d (%d waits): stored %d reasons, want %d: %v, want %v", call, len(waits), len(store.last), len(want), keys(store.last), keys(want))
				}
				for _, id := range line {
					got, ok := storedReasonOf(e, id)
					m, counts := model.stored[id]
					counts = counts && m.seen == model.call
					if ok != counts || ok && got != m.text {
						t.Fatalf("call %d: job %d's stored reason %q (counts %v), want %q (%v)", call, id, got, ok, m.text, counts)
					}
				}
			}
		})
	}
}

func keys(m map[int64]string) []int64 { return slices.Sorted(maps.Keys(m)) }
