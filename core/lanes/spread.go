package lanes

// Move records a job moved from one lane to another by defragmentation.
type Move struct {
	Job      int64
	From, To int
}

// Spread undoes sharing where memory allows: while some job that shares
// a lane could have a lane of its own with the safety condition still
// holding, it moves the one that costs least memory (its E less what its
// old lane shrinks by), ties to the lower lane ID, then the job admitted
// first. Jobs in separate lanes run concurrently, so this turns time
// sharing back into parallel work. A running iteration moves with its
// job. Pool calls it only when no job waits, since it spends free memory
// that a waiting job might need.
func (g *GPU) Spread() []Move {
	var moves []Move
	for {
		free := g.FreeMiB()
		var best *member
		var bestCost int64
		for _, l := range g.lanes {
			if len(l.members) < 2 {
				continue
			}
			for _, m := range l.members {
				cost := m.mem.EphemeralMiB - (l.size - sizeWithout(l, m))
				if cost > free {
					continue
				}
				if best == nil || cost < bestCost || (cost == bestCost && l.id < best.lane.id) {
					best, bestCost = m, cost
				}
			}
		}
		if best == nil {
			return moves
		}
		from := best.lane
		from.remove(best)
		from.resize()
		to := &lane{id: g.nextLane}
		g.nextLane++
		g.lanes = append(g.lanes, to)
		to.add(best)
		to.resize()
		moves = append(moves, Move{Job: best.job.ID, From: from.id, To: to.id})
	}
}

// sizeWithout is the lane's size without member x.
func sizeWithout(l *lane, x *member) int64 {
	var size int64
	for _, m := range l.members {
		if m != x {
			size = max(size, m.mem.EphemeralMiB)
		}
	}
	return size
}
