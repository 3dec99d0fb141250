package engine

import "testing"

// TestPassJobsFind finds each job by ID, and none that is not there,
// whether the jobs come in ID order (searched in place), out of it
// (mapped), or with some left out of the index (a snapshot's, which
// skips the jobs waiting out a retry's backoff).
func TestPassJobsFind(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ids     []int64
		skip    map[int64]bool // indexed by add, without these
		absent  []int64
		inOrder bool
	}{
		{name: "empty", absent: []int64{0, 1}, inOrder: true},
		{name: "one", ids: []int64{7}, absent: []int64{6, 8}, inOrder: true},
		{name: "in order", ids: []int64{2, 3, 5, 8, 13, 21}, absent: []int64{1, 4, 22}, inOrder: true},
		{name: "out of order", ids: []int64{5, 2, 8, 3}, absent: []int64{1, 4, 9}},
		{name: "a repeated ID is out of order", ids: []int64{2, 2, 3}, absent: []int64{1, 4}},
		{name: "some skipped", ids: []int64{1, 2, 3, 4, 5}, skip: map[int64]bool{2: true, 5: true}, absent: []int64{2, 5, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs := make([]Job, len(tc.ids))
			for i, id := range tc.ids {
				jobs[i].ID = id
			}
			var p *passJobs
			if tc.skip == nil {
				p = newPassJobs(jobs)
				if p.inOrder != tc.inOrder {
					t.Errorf("inOrder = %v, want %v", p.inOrder, tc.inOrder)
				}
			} else {
				p = &passJobs{jobs: jobs}
				for i, j := range jobs {
					if !tc.skip[j.ID] {
						p.add(j.ID, i)
					}
				}
				p.index()
			}
			for i, id := range tc.ids {
				if tc.skip[id] {
					continue
				}
				k, ok := p.find(id)
				if !ok || p.jobs[k].ID != id {
					t.Errorf("find(%d) = %d, %v; want a job %d (at %d)", id, k, ok, id, i)
				}
				if j := p.job(id); j.ID != id {
					t.Errorf("job(%d) gives job %d", id, j.ID)
				}
			}
			for _, id := range tc.absent {
				if k, ok := p.find(id); ok {
					t.Errorf("find(%d) = %d, true; want none", id, k)
				}
			}
		})
	}
	var none *passJobs
	if _, ok := none.find(1); ok {
		t.Error("a nil index finds job 1")
	}
}
