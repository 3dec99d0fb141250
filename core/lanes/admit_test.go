package lanes

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/gpuportal/gpuportal/core/memest"
)

// TestAdmission checks the admission rules on one GPU of 10 MiB without
// padding. Each case admits before in order, then want's job.
func TestAdmission(t *testing.T) {
	cases := []struct {
		name      string
		before    []Job
		running   []int64 // jobs whose iteration runs when the job comes
		job       Job
		wantErr   error
		want      Placement // GPU, Lane, NewLane, Merged, GrowthMiB checked
		wantLanes map[int]int64
		wantUsed  int64
	}{
		{
			name: "a new lane of E when P+E is free",
			job:  job(1, 1, 3),
			want: Placement{Lane: 1, NewLane: true, GrowthMiB: 3}, wantLanes: map[int]int64{1: 3}, wantUsed: 4,
		},
		{
			name:   "joins the smallest lane that holds E when no room for a new lane",
			before: []Job{job(1, 1, 4), job(2, 1, 2)}, // used 8, free 2
			job:    job(3, 1, 2),
			want:   Placement{Lane: 2}, wantLanes: map[int]int64{1: 4, 2: 2}, wantUsed: 9,
		},
		{
			name:   "grows the lane that needs least growth",
			before: []Job{job(1, 1, 4), job(2, 1, 3)}, // used 9, free 1
			job:    job(3, 0, 5),
			want:   Placement{Lane: 1, GrowthMiB: 1}, wantLanes: map[int]int64{1: 5, 2: 3}, wantUsed: 10,
		},
		{
			name:   "merges lanes when nothing else fits",
			before: []Job{job(1, 1, 3), job(2, 1, 3)}, // used 8, free 2
			job:    job(3, 1, 5),                      // new lane 6 > 2; join needs 1+2 > 2
			want:   Placement{Lane: 1, Merged: []int{1, 2}, GrowthMiB: 2}, wantLanes: map[int]int64{1: 5}, wantUsed: 8,
		},
		{
			name:    "never merges two running lanes",
			before:  []Job{job(1, 1, 3), job(2, 1, 3)},
			running: []int64{1, 2},
			job:     job(3, 1, 5),
			wantErr: ErrNoRoom,
		},
		{
			name:    "merges a running lane into an idle one",
			before:  []Job{job(1, 1, 3), job(2, 1, 3)},
			running: []int64{2},
			job:     job(3, 1, 5),
			want:    Placement{Lane: 1, Merged: []int{1, 2}, GrowthMiB: 2}, wantLanes: map[int]int64{1: 5}, wantUsed: 8,
		},
		{
			name:    "refuses a job larger than the GPU",
			job:     job(1, 4, 7),
			wantErr: ErrTooLarge,
		},
		{
			name:    "refuses a job already admitted",
			before:  []Job{job(1, 1, 1)},
			job:     job(1, 1, 1),
			wantErr: ErrDuplicate,
		},
		{
			name:    "refuses negative memory",
			job:     job(1, -1, 1),
			wantErr: ErrBadInput,
		},
		{
			name:   "a job with no ephemeral memory still gets a lane",
			before: []Job{job(1, 2, 2)},
			job:    job(2, 1, 0),
			want:   Placement{Lane: 2, NewLane: true}, wantLanes: map[int]int64{1: 2, 2: 0}, wantUsed: 5,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := mustGPU(t, 10, noPad(Pack))
			for _, j := range c.before {
				mustAdmit(t, g, j)
			}
			for _, id := range c.running {
				if err := g.Request(id, 0); err != nil {
					t.Fatal(err)
				}
			}
			g.Grant(0)
			before := g.View()
			got, err := g.Admit(c.job, 0)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("err %v, want %v", err, c.wantErr)
				}
				if after := g.View(); !viewsEqual(before, after) {
					t.Fatalf("a failed admission changed the GPU:\n%+v\n%+v", before, after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := g.Check(); err != nil {
				t.Fatal(err)
			}
			if got.Lane != c.want.Lane || got.NewLane != c.want.NewLane || !slices.Equal(got.Merged, c.want.Merged) || got.GrowthMiB != c.want.GrowthMiB {
				t.Errorf("placement %+v, want lane %d new %v merged %v growth %d", got, c.want.Lane, c.want.NewLane, c.want.Merged, c.want.GrowthMiB)
			}
			if l := laneSizes(g); !maps.Equal(l, c.wantLanes) {
				t.Errorf("lanes %v, want %v", l, c.wantLanes)
			}
			if u := g.UsedMiB(); u != c.wantUsed {
				t.Errorf("used %d, want %d", u, c.wantUsed)
			}
		})
	}
}

func viewsEqual(a, b GPUView) bool {
	if a.UsedMiB != b.UsedMiB || len(a.Lanes) != len(b.Lanes) {
		return false
	}
	for i := range a.Lanes {
		x, y := a.Lanes[i], b.Lanes[i]
		if x.ID != y.ID || x.SizeMiB != y.SizeMiB || x.Running != y.Running || len(x.Jobs) != len(y.Jobs) {
			return false
		}
	}
	return true
}

// TestAdmissionPads checks the default padding: P x 1.1, then the total
// x 1.05, rounded up. P 10, E 50: P' = 11, total ceil(61 x 1.05) = 65,
// so E' = 54.
func TestAdmissionPads(t *testing.T) {
	g := mustGPU(t, 100, Config{})
	p := mustAdmit(t, g, job(1, 10, 50))
	want := memest.Estimate{PersistentMiB: 11, EphemeralMiB: 54, Source: memest.Declared}
	if p.Memory != want || g.UsedMiB() != 65 {
		t.Fatalf("held %+v, used %d; want %+v, used 65", p.Memory, g.UsedMiB(), want)
	}
	// 36 MiB free: a padded 10+25 (11 + ceil(36 x 1.05) - 11 = 38) needs 38.
	if _, err := g.Admit(job(2, 10, 25), 0); err != nil {
		t.Fatalf("join: %v", err) // it joins lane 1 (E' 27 <= 54) with P' 11 <= 35
	}
	if got := laneSizes(g); !maps.Equal(got, map[int]int64{1: 54}) {
		t.Fatalf("lanes %v, want one lane of 54", got)
	}
}

// TestRelease checks that a release frees P, shrinks the lane to the
// largest E left, and closes an emptied lane.
func TestRelease(t *testing.T) {
	g := mustGPU(t, 20, noPad(Pack))
	mustAdmit(t, g, job(1, 1, 8)) // lane 1: 8
	mustAdmit(t, g, job(2, 1, 6)) // lane 2: 6, used 16
	mustAdmit(t, g, job(3, 1, 5)) // free 4 < 6: joins lane 2 (smallest holding 5)
	mustAdmit(t, g, job(4, 1, 3)) // free 3 < 4 -> joins lane 2 (size 6 < 8)
	if got := laneSizes(g); !maps.Equal(got, map[int]int64{1: 8, 2: 6}) {
		t.Fatalf("lanes %v", got)
	}
	steps := []struct {
		release   int64
		wantLanes map[int]int64
		wantUsed  int64
	}{
		{2, map[int]int64{1: 8, 2: 5}, 16}, // lane 2 shrinks to 5; P 3
		{1, map[int]int64{2: 5}, 7},        // lane 1 closes
		{3, map[int]int64{2: 3}, 4},
		{4, map[int]int64{}, 0},
	}
	for _, s := range steps {
		if err := g.Release(s.release); err != nil {
			t.Fatal(err)
		}
		if err := g.Check(); err != nil {
			t.Fatal(err)
		}
		if got := laneSizes(g); !maps.Equal(got, s.wantLanes) || g.UsedMiB() != s.wantUsed {
			t.Fatalf("after releasing %d: lanes %v used %d, want %v used %d", s.release, got, g.UsedMiB(), s.wantLanes, s.wantUsed)
		}
	}
	if err := g.Release(1); !errors.Is(err, ErrUnknownJob) {
		t.Fatalf("second release: %v", err)
	}
}

// TestSpread checks that jobs sharing a lane get lanes of their own once
// memory allows, the cheapest first.
func TestSpread(t *testing.T) {
	g := mustGPU(t, 12, noPad(Pack))
	mustAdmit(t, g, job(1, 1, 5)) // lane 1: 5, used 6
	mustAdmit(t, g, job(2, 1, 4)) // new lane needs 5 <= 6 free: lane 2: 4, used 11
	mustAdmit(t, g, job(3, 1, 3)) // free 1: joins lane 2, used 12
	mustAdmit(t, g, job(4, 0, 3)) // joins lane 2
	if moves := g.Spread(); len(moves) != 0 {
		t.Fatalf("no room, yet moved %v", moves)
	}
	if err := g.Release(1); err != nil { // frees 6
		t.Fatal(err)
	}
	// Lane 2 holds jobs 2 (E 4), 3 (E 3), 4 (E 3) and 6 MiB are free.
	// Moving 3 or 4 costs 3; moving 2 costs 4 - (4 - 3) = 3 too. Ties go
	// to the job admitted first: 2 moves to lane 3 (cost 3, free 3), then
	// 3 moves to lane 4 (cost 3, free 0).
	moves := g.Spread()
	want := []Move{{Job: 2, From: 2, To: 3}, {Job: 3, From: 2, To: 4}}
	if !slices.Equal(moves, want) {
		t.Fatalf("moves %v, want %v", moves, want)
	}
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
	if got := laneSizes(g); !maps.Equal(got, map[int]int64{2: 3, 3: 4, 4: 3}) || g.FreeMiB() != 0 {
		t.Fatalf("lanes %v free %d", got, g.FreeMiB())
	}
}
