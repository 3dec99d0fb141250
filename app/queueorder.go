package app

import (
	"reflect"
	"sync"

	"github.com/gpuportal/gpuportal/core/sched"
	"github.com/gpuportal/gpuportal/models"
)

// orderCache keeps the queues' order (Moment.queueOrder) of the last
// moment that asked for it, and each team's jobs in that order. The order
// follows from the unfinished jobs' QueueRows, which the store shares
// until a job changes (models.Store.QueueRows), and the engine's places,
// a map it replaces at each pass: while both are the same, so is the
// order. Placing 10,000 jobs was most of what the queues and a team's
// reads cost on PostgreSQL, where the store's own work is done outside
// the server (issue 33); with the order kept, a read places them once per
// change and pass, not once per read.
type orderCache struct {
	mu sync.Mutex
	// rows and waits are what order was computed from, held so that
	// neither is freed and its address given to another while kept.
	rows  []models.QueueRow
	waits map[int64]sched.Wait
	n     int
	order [][]*models.QueueRow
	// teams are each team's unfinished jobs in order, computed at the
	// first TeamQueue of the order.
	teams map[string][]QueuePlace
}

// get returns the order of rows with waits over n queues, computing it
// when it is not the one kept, and with teams each team's jobs in it
// (else nil).
func (c *orderCache) get(rows []models.QueueRow, waits map[int64]sched.Wait, n int, compute func() [][]*models.QueueRow,
	teams bool) ([][]*models.QueueRow, map[string][]QueuePlace) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.order == nil || c.n != n || !sameRows(c.rows, rows) || !sameWaits(c.waits, waits) {
		c.rows, c.waits, c.n, c.order, c.teams = rows, waits, n, compute(), nil
	}
	if !teams {
		return c.order, nil
	}
	if c.teams == nil {
		c.teams = teamPlaces(c.order)
	}
	return c.order, c.teams
}

// sameRows says whether a and b are the same slice: the store's shared
// rows, not rows that happen to be equal.
func sameRows(a, b []models.QueueRow) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sameWaits says whether a and b are the same map.
func sameWaits(a, b map[int64]sched.Wait) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
