package sched

// A job may have machines to avoid (Job.AvoidNodes): its owner has no
// Unix account there. While the walk decides such a job, those machines
// are masked: taken out of the free-GPU buckets and marked unschedulable,
// so that fitting, placing, joining a shared GPU and counting what
// preemption frees all pass them over; the walk unmasks them before the
// next job. Unmasking counts a machine's free GPUs again from its slots:
// a running job preempted for the masked job may have held GPUs there.

// mask hides the machines pending entry e avoids (nodes mode only).
func (p *pass) mask(e *entry) {
	if p.count {
		return
	}
	avoid := p.s.Jobs[e.job].AvoidNodes
	for _, name := range avoid {
		i, ok := p.cl.find(name)
		if !ok || !p.cl.nodes[i].sched {
			continue
		}
		n := &p.cl.nodes[i]
		p.cl.buckets[n.free].remove(int(i))
		p.cl.free -= int(n.free)
		n.sched = false
		p.masked = append(p.masked, i)
		p.maskedCap += int(n.n)
		p.maskedFree += int(n.free)
	}
	if len(p.masked) > 0 {
		p.cl.frDirty = true
	}
}

// unmask shows the masked machines again.
func (p *pass) unmask() {
	if len(p.masked) == 0 {
		return
	}
	for _, i := range p.masked {
		n := &p.cl.nodes[i]
		n.sched = true
		n.free = 0
		for s := n.first; s < n.first+n.n; s++ {
			if !p.cl.busy[s] {
				n.free++
			}
		}
		p.cl.free += int(n.free)
		p.cl.buckets[n.free].add(int(i))
	}
	p.masked, p.maskedCap, p.maskedFree = p.masked[:0], 0, 0
	p.cl.frDirty = true
}
