package lanes

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpuportal/gpuportal/core/memest"
)

// exerciser drives a Pool through arbitrary operations, as a property
// test or the fuzzer picks them, and checks after every step that the
// pool's invariants hold (the safety condition on every GPU among them)
// and that no two iterations of one lane overlap. It keeps its own record
// of the iterations that run, from the grants and finishes it saw, and
// compares it with the lanes the pool shows.
type exerciser struct {
	t      testing.TB
	p      *Pool
	now    float64
	nextID int64
	open   map[int64]bool // jobs whose granted iteration has not finished
	log    []string       // the operations so far, for failure messages
}

func newExerciser(t testing.TB, caps []int64, cfg Config) *exerciser {
	p, err := NewPool(caps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &exerciser{t: t, p: p, nextID: 1, open: map[int64]bool{}}
}

// admitted lists the admitted jobs in a stable order.
func (x *exerciser) admitted() []int64 {
	var out []int64
	for _, v := range x.p.View() {
		out = append(out, v.jobIDs()...)
	}
	return out
}

func pick[T any](s []T, b byte) (T, bool) {
	var zero T
	if len(s) == 0 {
		return zero, false
	}
	return s[int(b)%len(s)], true
}

// step runs operation op with arguments a, b, c.
func (x *exerciser) step(op, a, b, c byte) {
	x.log = append(x.log, fmt.Sprintf("t=%v op %d(%d,%d,%d)", x.now, op%12, a, b, c))
	p := x.p
	var err error
	switch op % 12 {
	case 0, 1: // submit
		j := Job{ID: x.nextID, Memory: memest.Estimate{PersistentMiB: int64(a % 24), EphemeralMiB: int64(b % 40)}}
		if c%3 == 0 {
			j.DurationS = float64(c)
		}
		x.nextID++
		err = p.Submit(j, x.now)
		if errors.Is(err, ErrTooLarge) {
			err = nil
		}
	case 2:
		p.Schedule(x.now)
	case 3: // admit one waiting job
		if w, ok := pick(p.Waiting(), a); ok {
			if _, err = p.Admit(w.ID, x.now); errors.Is(err, ErrNoRoom) {
				err = nil
			}
		}
	case 4: // release
		if id, ok := pick(x.admitted(), a); ok {
			err = p.Release(id)
			delete(x.open, id)
		}
	case 5: // request
		if id, ok := pick(x.admitted(), a); ok {
			expected := int64(0)
			if b%4 == 0 {
				expected = int64(c % 48)
			}
			err = p.Request(id, expected)
			if errors.Is(err, ErrRunning) || errors.Is(err, ErrExceedsLane) {
				err = nil
			}
		}
	case 6:
		x.grant()
	case 7: // finish
		var running []int64
		for _, id := range x.admitted() {
			if x.open[id] {
				running = append(running, id)
			}
		}
		if id, ok := pick(running, a); ok {
			var f Finished
			f, err = p.Finish(id, x.now, int64(b%48))
			delete(x.open, id)
			if err == nil && f.Exceeded {
				err = p.Release(id) // as a caller must
			}
		}
	case 8: // hold or unhold
		i := int(a) % p.Len()
		if p.View()[i].Held {
			err = p.Unhold(i)
		} else if err = p.Hold(i); errors.Is(err, ErrBusy) {
			err = nil
		}
	case 9:
		if w, ok := pick(p.Waiting(), a); ok {
			err = p.Cancel(w.ID)
		}
	case 10:
		p.Defragment()
	case 11:
		x.now += float64(a % 50)
	}
	if err != nil {
		x.fail("op %d: %v", op%12, err)
	}
	x.check()
}

// grant records each grant and checks it starts on a lane that runs
// nothing.
func (x *exerciser) grant() {
	lanesOf := map[int64][2]int{} // job -> GPU, lane
	for _, v := range x.p.View() {
		for _, l := range v.Lanes {
			for _, j := range l.Jobs {
				lanesOf[j.ID] = [2]int{v.Index, l.ID}
			}
		}
	}
	for _, g := range x.p.Grant(x.now) {
		if x.open[g.Job] {
			x.fail("job %d granted while its iteration runs", g.Job)
		}
		for id := range x.open {
			if lanesOf[id] == [2]int{g.GPU, g.Lane} {
				x.fail("job %d granted on GPU %d lane %d while job %d runs there", g.Job, g.GPU, g.Lane, id)
			}
		}
		x.open[g.Job] = true
	}
}

// check verifies the invariants after a step.
func (x *exerciser) check() {
	if err := x.p.Check(); err != nil {
		x.fail("%v", err)
	}
	seen := 0
	for _, v := range x.p.View() {
		if v.UsedMiB > v.CapacityMiB {
			x.fail("GPU %d: %d MiB used of %d", v.Index, v.UsedMiB, v.CapacityMiB)
		}
		for _, l := range v.Lanes {
			running := 0
			for _, j := range l.Jobs {
				if x.open[j.ID] != j.Running {
					x.fail("job %d: the pool says running %v, the grants say %v", j.ID, j.Running, x.open[j.ID])
				}
				if x.open[j.ID] {
					running++
					seen++
				}
			}
			if running > 1 {
				x.fail("GPU %d lane %d: %d iterations overlap", v.Index, l.ID, running)
			}
		}
	}
	if seen != len(x.open) {
		x.fail("%d iterations open, %d on lanes", len(x.open), seen)
	}
}

func (x *exerciser) fail(format string, args ...any) {
	x.t.Helper()
	tail := x.log
	if len(tail) > 30 {
		tail = tail[len(tail)-30:]
	}
	x.t.Fatalf("%s\nlast operations:\n%v", fmt.Sprintf(format, args...), tail)
}
