//go:build cgo

package nvml

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	nv "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// eventQueue is a mocked NVML event set: Wait hands out queued events,
// then times out.
type eventQueue struct {
	mu     sync.Mutex
	events []nv.EventData
	freed  int
}

func (q *eventQueue) push(ev nv.EventData) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.events = append(q.events, ev)
}

// newEventQueue makes srv's event sets hand out the queue's events, and
// its GPUs accept registration for XID events.
func newEventQueue(srv *dgxa100.Server) *eventQueue {
	q := &eventQueue{}
	set := &mock.EventSet{
		WaitFunc: func(uint32) (nv.EventData, nv.Return) {
			q.mu.Lock()
			defer q.mu.Unlock()
			if len(q.events) == 0 {
				return nv.EventData{}, nv.ERROR_TIMEOUT
			}
			ev := q.events[0]
			q.events = q.events[1:]
			return ev, nv.SUCCESS
		},
		FreeFunc: func() nv.Return { q.mu.Lock(); q.freed++; q.mu.Unlock(); return nv.SUCCESS },
	}
	srv.EventSetCreateFunc = func() (nv.EventSet, nv.Return) { return set, nv.SUCCESS }
	for _, d := range srv.Devices {
		d.(*dgxa100.Device).RegisterEventsFunc = func(types uint64, _ nv.EventSet) nv.Return {
			if types&nv.EventTypeXidCriticalError == 0 {
				return nv.ERROR_INVALID_ARGUMENT
			}
			return nv.SUCCESS
		}
	}
	return q
}

func TestXIDEventsCountPerGPU(t *testing.T) {
	srv := fakeMachine(t, nil)
	q := newEventQueue(srv)
	var log bytes.Buffer
	b, err := New(srv, quietLogger(&log))
	if err != nil {
		t.Fatal(err)
	}
	xid := func(gpu, code int) nv.EventData {
		return nv.EventData{Device: srv.Devices[gpu], EventType: nv.EventTypeXidCriticalError, EventData: uint64(code)}
	}
	q.push(xid(2, 79))
	q.push(xid(2, 13)) // an application's fault: not the GPU's
	q.push(xid(5, 48))
	q.push(nv.EventData{Device: srv.Devices[3], EventType: nv.EventTypePState, EventData: 1})
	now := time.Unix(1000, 0)
	ss := b.Sample(now)
	tests := []struct {
		gpu   int
		count uint64
		last  int
	}{
		{0, 0, 0},
		{2, 1, 79},
		{3, 0, 0},
		{5, 1, 48},
	}
	for _, tc := range tests {
		if s := ss[tc.gpu]; s.XIDErrors != tc.count || s.LastXID != tc.last {
			t.Errorf("GPU %d: %d XID errors, last %d; want %d, last %d", tc.gpu, s.XIDErrors, s.LastXID, tc.count, tc.last)
		}
	}
	// Counts stay when no new event arrives, and grow with the next one.
	q.push(xid(2, 79))
	ss = b.Sample(now.Add(time.Second))
	if ss[2].XIDErrors != 2 || ss[5].XIDErrors != 1 {
		t.Errorf("after a second XID 79: GPU 2 has %d, GPU 5 %d; want 2 and 1", ss[2].XIDErrors, ss[5].XIDErrors)
	}
	if !strings.Contains(log.String(), "fell off the bus") {
		t.Errorf("the log does not name XID 79:\n%s", log.String())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if q.freed != 1 {
		t.Errorf("event set freed %d times, want 1", q.freed)
	}
}

func TestNoEventSupportLeavesXIDsZero(t *testing.T) {
	srv := fakeMachine(t, nil)
	srv.EventSetCreateFunc = func() (nv.EventSet, nv.Return) { return nil, nv.ERROR_NOT_SUPPORTED }
	var log bytes.Buffer
	b, err := New(srv, quietLogger(&log))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, s := range b.Sample(time.Unix(1000, 0)) {
		if s.XIDErrors != 0 {
			t.Errorf("GPU %d: %d XID errors without events", s.Index, s.XIDErrors)
		}
	}
	if !strings.Contains(log.String(), "XID errors are not available") {
		t.Errorf("the log does not say XID errors are unavailable:\n%s", log.String())
	}
}
