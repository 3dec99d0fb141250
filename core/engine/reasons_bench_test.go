package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/sched"
)

// BenchmarkRecordReasons measures what storing a pass's wait reasons
// costs the engine at a long queue: each op is a pass of queued waits
// in one queue after the first has started and a new job has joined the
// end, a second later, so that every position (and so every reason's
// figures) moved by one, as at a busy cluster. What the store does with
// the reasons changed is the memory store's (a map under a lock), so
// that the figure is the engine's.
//
//	go test -run '^$' -bench RecordReasons -benchtime 2000x ./core/engine
func BenchmarkRecordReasons(b *testing.B) {
	for _, queued := range []int{10, 10000} {
		b.Run(fmt.Sprintf("queued=%d", queued), func(b *testing.B) {
			e, clock := newTestEngine(b, newMemStore(), newFakeNode("n0", 1))
			ctx := context.Background()
			first := int64(1)
			waits := make([]sched.Wait, queued)
			fill := func() {
				for i := range waits {
					id := first + int64(i)
					waits[i] = sched.Wait{JobID: id, Position: i + 1,
						Reason: fmt.Sprintf("needs 1 GPU; 0 of 1,024 free; %d jobs ahead in line", i)}
				}
			}
			record := func() {
				if err := e.recordReasons(ctx, waits, clock.t); err != nil {
					b.Fatal(err)
				}
				first++
				clock.t = clock.t.Add(time.Second)
			}
			for range 40 { // past the first stores and a refresh of each
				fill()
				record()
			}
			// The reasons' texts are made outside the timer: the
			// scheduler writes them (sched.Wait.Reason).
			for b.Loop() {
				b.StopTimer()
				fill()
				b.StartTimer()
				record()
			}
		})
	}
}
