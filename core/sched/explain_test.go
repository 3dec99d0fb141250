package sched

import "testing"

func TestExplanations(t *testing.T) {
	// Three nodes of 8 GPUs; queue-0 jobs hold 5 GPUs of node-0, all of
	// node-1 and 3 of node-2; four skewed 8-GPU jobs wait in queue 0.
	example := Snapshot{Now: 10, Nodes: nodes(8, 8, 8), Jobs: []Job{
		busy(100, "node-0", 0, 5), busy(101, "node-1", 0, 8), busy(102, "node-2", 0, 3),
		pend(1, 8, 1, model("vgg16")), pend(2, 8, 2, model("vgg16")),
		pend(3, 8, 3, model("vgg16")), pend(4, 8, 4, model("vgg16")),
	}}
	cases := []struct {
		name   string
		cfg    Config
		snap   Snapshot
		job    int64
		cause  WaitCause
		reason string
	}{{
		name:   "locality: the largest free block and the jobs ahead",
		cfg:    Config{Policy: "tiresias-l", LocalityWaitS: -1},
		snap:   example,
		job:    4,
		cause:  WaitLocality,
		reason: "needs 8 GPUs on one node; largest free block is 5 on node-2; 3 jobs ahead in queue 0",
	}, {
		name:   "locality: when it relaxes",
		cfg:    Config{Policy: "tiresias-l"},
		snap:   example,
		job:    1,
		cause:  WaitLocality,
		reason: "needs 8 GPUs on one node; largest free block is 5 on node-2; may use 2 nodes after waiting 291 s more; first in queue 0",
	}, {
		name: "capacity: what is free and what preemption could free",
		cfg:  Config{Policy: "tiresias-l"},
		snap: Snapshot{Now: 9000, Nodes: nodes(8, 8), Jobs: []Job{
			busy(100, "node-0", 0, 6),
			run(101, 0, on("node-1", 0, 1, 2, 3), served(1000), inQueue(1, 4000)),
			pend(1, 16, 8000),
		}},
		job:    1,
		cause:  WaitCapacity,
		reason: "needs 16 GPUs; 6 free (largest block 4 on node-1); preempting every job ranked below it would free only 4 more; first in queue 0",
	}, {
		name: "capacity: the busy GPUs outrank it",
		cfg:  Config{Policy: "tiresias-l"},
		snap: Snapshot{Now: 9000, Nodes: nodes(8), Jobs: []Job{
			busy(100, "node-0", 0, 6),
			pend(1, 4, 8000, served(1000), inQueue(1, 8500)),
		}},
		job:    1,
		cause:  WaitCapacity,
		reason: "needs 4 GPUs; 2 free; the busy GPUs are held by jobs ranked above it; first in queue 1",
	}, {
		name: "fifo: blocked behind the head of the line",
		cfg:  Config{Policy: "fifo"},
		snap: Snapshot{Nodes: nodes(8), Jobs: []Job{
			busy(100, "node-0", 0, 4), pend(1, 8, 1), pend(2, 1, 2),
		}},
		job:    2,
		cause:  WaitBlocked,
		reason: "waits behind job 1, which needs 8 GPUs and does not fit; fifo starts jobs strictly in arrival order; 1 job ahead in line",
	}, {
		name:   "too large for the cluster",
		cfg:    Config{Policy: "fjf"},
		snap:   Snapshot{Nodes: nodes(8), Jobs: []Job{pend(1, 9, 0)}},
		job:    1,
		cause:  WaitTooLarge,
		reason: "needs 9 GPUs; the schedulable nodes have 8 in all; first in line",
	}, {
		name:   "no GPUs asked for",
		cfg:    Config{Policy: "fjf"},
		snap:   Snapshot{Nodes: nodes(8), Jobs: []Job{pend(1, 0, 0)}},
		job:    1,
		cause:  WaitInvalid,
		reason: "requests 0 GPUs; a job needs at least one; first in line",
	}, {
		name: "preempted in this pass",
		cfg:  Config{Policy: "tiresias-l"},
		snap: Snapshot{Now: 1500, Nodes: nodes(4), Jobs: []Job{
			run(1, 0, on("node-0", span(0, 4)...), served(1000), inQueue(1, 800)),
			pend(2, 4, 1400),
		}},
		job:    1,
		cause:  WaitPreempted,
		reason: "preempted for job 2, which ranks above it; first in queue 1",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := mustNew(t, c.cfg).Schedule(c.snap)
			w, ok := waitOf(d, c.job)
			if !ok {
				t.Fatalf("job %d has no wait: %+v", c.job, d)
			}
			if w.Cause != c.cause || w.Reason != c.reason {
				t.Errorf("got  %s: %q\nwant %s: %q", w.Cause, w.Reason, c.cause, c.reason)
			}
		})
	}
}

func TestOmitWaits(t *testing.T) {
	sc := mustNew(t, Config{Policy: "tiresias-l", OmitWaits: true})
	d := sc.Schedule(Snapshot{Nodes: nodes(8), Jobs: []Job{pend(1, 9, 0), pend(2, 8, 1), pend(3, 1, 2)}})
	if len(d.Waits) != 0 || !sameIDs(startIDs(d), []int64{2}) {
		t.Errorf("decisions %+v, want job 2 started and no waits", d)
	}
}
