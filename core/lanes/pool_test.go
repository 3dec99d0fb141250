package lanes

import (
	"errors"
	"testing"
)

// TestPoolPlacement checks the choice of GPU: a new lane on the GPU it
// leaves fullest, new lanes anywhere before joining a lane, joins by best
// fit, and held GPUs skipped. GPUs of 10 MiB, jobs of P 1 and E 3.
func TestPoolPlacement(t *testing.T) {
	p, err := NewPool([]int64{10, 10, 10}, noPad(Pack))
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name     string
		hold     int // GPU to hold first, -1 for none
		wantGPU  int
		wantLane int
		wantNew  bool
	}{
		{"all empty: the lowest index", -1, 0, 1, true},
		{"a new lane on the fullest GPU", -1, 0, 2, true},
		{"GPU 0 has 2 MiB free: a new lane on GPU 1", -1, 1, 1, true},
		{"GPU 2 held: GPU 1 again", 2, 1, 2, true},
		{"no room for a new lane: best-fit join, lowest GPU", -1, 0, 1, false},
	}
	for i, s := range steps {
		if s.hold >= 0 {
			if err := p.Hold(s.hold); err != nil {
				t.Fatal(err)
			}
		}
		id := int64(i + 1)
		if err := p.Submit(job(id, 1, 3), 0); err != nil {
			t.Fatal(err)
		}
		got, err := p.Admit(id, 0)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got.GPU != s.wantGPU || got.Lane != s.wantLane || got.NewLane != s.wantNew {
			t.Fatalf("%s: placed %+v, want GPU %d lane %d new %v", s.name, got, s.wantGPU, s.wantLane, s.wantNew)
		}
		if err := p.Check(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Hold(0); !errors.Is(err, ErrBusy) {
		t.Fatalf("hold a GPU with lanes: %v", err)
	}
	if got := p.Idle(); len(got) != 0 {
		t.Fatalf("idle %v, want none", got)
	}
	if err := p.Unhold(2); err != nil {
		t.Fatal(err)
	}
	if got := p.Idle(); len(got) != 1 || got[0] != 2 {
		t.Fatalf("idle %v, want [2]", got)
	}
}

// TestPoolRefuses checks what Submit refuses.
func TestPoolRefuses(t *testing.T) {
	p, err := NewPool([]int64{10, 20}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Submit(job(1, 10, 10), 0); !errors.Is(err, ErrTooLarge) { // padded 11 + 11 > 20
		t.Fatalf("too large: %v", err)
	}
	if err := p.Submit(job(2, 1, 1), 0); err != nil {
		t.Fatal(err)
	}
	if err := p.Submit(job(2, 1, 1), 0); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := NewPool([]int64{0}, Config{}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("zero capacity: %v", err)
	}
	if _, err := NewPool([]int64{1}, Config{Policy: "lifo"}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("bad policy: %v", err)
	}
}

// TestAging: one GPU of 10 MiB. Small jobs (P 2, E 2) run 10 s; two
// arrive at 0, then one every 5 s. A large job (P 7, E 1) arrives at 1.
// Without aging, one or two small jobs are always there: with one, the
// large job would need 7 + 0 to join its lane or 8 for a lane of its
// own, and only 6 are free; with two, merging their lanes frees only 2
// more. So it never fits. With aging after 3 s, it reserves the GPU at
// 4: the small job of 5 waits, the two of 0 leave at 10, and the large
// job is admitted at 10.
func TestAging(t *testing.T) {
	cases := []struct {
		name  string
		aging float64
		want  float64 // admission time of the large job, -1 never (by 60)
	}{
		{"with aging the large job is admitted once the GPU drains", 3, 10},
		{"without aging small jobs starve the large one", -1, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := noPad(Pack)
			cfg.AgingS = c.aging
			p, err := NewPool([]int64{10}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			const large = 1000
			ends := map[int64]float64{}
			got := -1.0
			next := int64(1)
			for now := 0.0; now <= 60; now++ {
				for id, end := range ends {
					if end <= now {
						if err := p.Release(id); err != nil {
							t.Fatal(err)
						}
						delete(ends, id)
					}
				}
				arrivals := 0
				if now == 0 {
					arrivals = 2
				} else if int(now)%5 == 0 {
					arrivals = 1
				}
				for range arrivals {
					if err := p.Submit(job(next, 2, 2), now); err != nil {
						t.Fatal(err)
					}
					next++
				}
				if now == 1 {
					if err := p.Submit(job(large, 7, 1), now); err != nil {
						t.Fatal(err)
					}
				}
				p.Schedule(now)
				for _, id := range p.View()[0].jobIDs() {
					if _, ok := ends[id]; !ok && id != large {
						ends[id] = now + 10
					}
					if id == large && got < 0 {
						got = now
					}
				}
				if err := p.Check(); err != nil {
					t.Fatal(err)
				}
				if now == 4 && c.aging > 0 {
					if w := p.Waiting(); len(w) != 1 || w[0].ReservedGPU != 0 {
						t.Fatalf("at 4: waiting %+v, want the large job with GPU 0 reserved", w)
					}
				}
			}
			if got != c.want {
				t.Fatalf("large job admitted at %v, want %v", got, c.want)
			}
		})
	}
}

// jobIDs lists the GPU's jobs.
func (v GPUView) jobIDs() []int64 {
	var out []int64
	for _, l := range v.Lanes {
		for _, j := range l.Jobs {
			out = append(out, j.ID)
		}
	}
	return out
}

// TestDrainToMerge: one GPU of 10 MiB with two lanes of 3 (jobs P 1, E 3),
// both running. A job of P 1, E 5 fits only by merging them (free 2 + 3
// = 5 >= P 1 + growth 2), and two running iterations must not share a
// lane: the lanes drain. Neither gets a new iteration; when one ends,
// Finish says Retry and the job is admitted into the merged lane.
func TestDrainToMerge(t *testing.T) {
	p, err := NewPool([]int64{10}, noPad(Pack))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{1, 2} {
		p.Submit(job(id, 1, 3), 0)
	}
	p.Schedule(0)
	for _, id := range []int64{1, 2} {
		if err := p.Request(id, 0); err != nil {
			t.Fatal(err)
		}
	}
	if gr := p.Grant(0); len(gr) != 2 {
		t.Fatalf("grants %+v, want both lanes", gr)
	}
	p.Submit(job(3, 1, 5), 1)
	if _, err := p.Admit(3, 1); !errors.Is(err, ErrDraining) || !errors.Is(err, ErrNoRoom) {
		t.Fatalf("admit: %v, want no room and draining", err)
	}
	if j, g, ok := p.Drain(); !ok || j != 3 || g != 0 {
		t.Fatalf("drain %d %d %v", j, g, ok)
	}
	f, err := p.Finish(1, 2, 0)
	if err != nil || !f.Retry {
		t.Fatalf("finish: %+v %v, want Retry", f, err)
	}
	p.Request(1, 0)
	if gr := p.Grant(2); len(gr) != 0 {
		t.Fatalf("grants %+v in draining lanes", gr)
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	pl, err := p.Admit(3, 2)
	if err != nil || len(pl.Merged) != 2 {
		t.Fatalf("admit after the drain: %+v %v", pl, err)
	}
	if _, _, ok := p.Drain(); ok {
		t.Fatal("still draining")
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	// Job 2's iteration still runs in the merged lane: 1 and 3 wait.
	p.Request(3, 0)
	if gr := p.Grant(2); len(gr) != 0 {
		t.Fatalf("grants %+v while job 2 runs in the merged lane", gr)
	}
	p.Finish(2, 3, 0)
	if gr := p.Grant(3); len(gr) != 1 || gr[0].Job != 1 || gr[0].LaneJobs != 3 {
		t.Fatalf("grants %+v, want job 1 (pack) in a lane of 3", gr)
	}
}

// TestDrainedGPUIsKept: a GPU whose lanes drain for a waiting job and
// then empties cannot be held by a whole-GPU job; the waiting job gets it.
func TestDrainedGPUIsKept(t *testing.T) {
	p, err := NewPool([]int64{10}, noPad(Pack))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{1, 2} {
		p.Submit(job(id, 1, 3), 0)
	}
	p.Schedule(0)
	p.Request(1, 0)
	p.Request(2, 0)
	p.Grant(0)
	p.Submit(job(3, 1, 5), 0)
	if _, err := p.Admit(3, 0); !errors.Is(err, ErrDraining) {
		t.Fatalf("admit: %v", err)
	}
	p.Release(1)
	p.Release(2)
	if err := p.Hold(0); !errors.Is(err, ErrBusy) {
		t.Fatalf("hold a drained GPU: %v", err)
	}
	if idle := p.Idle(); len(idle) != 0 {
		t.Fatalf("idle %v", idle)
	}
	if got := p.Schedule(1); len(got) != 1 || got[0].Job != 3 || !got[0].NewLane {
		t.Fatalf("schedule: %+v", got)
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}
