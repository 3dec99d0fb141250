package models

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestQueueJobsReadAsGormReads: QueueJobsByID, which scans its columns
// itself (colscan.go), reads the jobs as gorm's Find of the same fields
// does, field for field, on both databases: jobs of every kind a queue's
// entry shows differently, fractions that PostgreSQL's numeric columns
// give as text, NULL in every column that may hold one (written by SQL,
// as an older version or a script may leave it), IDs that do not exist,
// repeated or out of order, and more than one batch of IDs.
func TestQueueJobsReadAsGormReads(t *testing.T) {
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openTestStore(t, dsn)
		now := time.Now().Truncate(time.Microsecond)
		ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
		kinds := []func(j *Job){
			func(j *Job) {},
			func(j *Job) { j.Reason = "waits for 2 GPUs" },
			func(j *Job) {
				j.State, j.Run, j.Placement, j.LastStartAt = JobRunning, 2, Strings{"m1:0", "m2:1"}, ago(10*time.Minute)
				j.RunAccrualS, j.RunGPUSeconds, j.HeldGPUs = 60.25, 90.125, 1.5
			},
			func(j *Job) { j.HoldReason = "alice's account was disabled" },
			func(j *Job) { j.State, j.RequeueStalls = JobPreempted, 99 },
			func(j *Job) { j.Dependencies, j.Reason = Strings{"afterok:1", "afterany:2"}, "waits for job 1" },
			func(j *Job) { j.ArrayID, j.ArrayIndex, j.ArrayLimit = 1, 1, 2 },
			func(j *Job) { j.SessionType, j.SessionPort, j.InteractivePriority = "jupyter", 8888, true },
			func(j *Job) { j.Priority, j.Name, j.User = "high", "naïve \"quoted\" name", "bob" },
			func(j *Job) { j.ExecutedS, j.AttainedService = 1.0/3, 1e-9 },
		}
		var js []Job
		for i := range 600 { // more than one batch of 500
			j := Job{Name: fmt.Sprintf("job-%d", i), Team: "vision", User: "alice", GPUs: 1 + i%4, State: JobQueued,
				Reason: "submitted", SubmittedAt: now.Add(-time.Hour), ExecutedS: 120, AttainedService: 240.5,
				Command: Strings{"python", "train.py"}, QueueIndex: 1, QueueSince: 5}
			kinds[i%len(kinds)](&j)
			js = append(js, j)
		}
		if err := s.db.CreateInBatches(js, 100).Error; err != nil {
			t.Fatal(err)
		}
		// NULL in each column that takes one, a column per job.
		nulls := 0
		for i, f := range queueJobFields[1:] {
			col := s.db.NamingStrategy.ColumnName("", f.name)
			if f.name == "User" {
				col = quoteUser(s.db)
			}
			if s.db.Exec("UPDATE jobs SET "+col+" = NULL WHERE id = ?", js[i].ID).Error == nil {
				nulls++
			}
		}
		t.Logf("%d of %d columns took NULL", nulls, len(queueJobFields)-1)
		if nulls < 5 {
			t.Fatalf("%d columns took NULL: the test writes none where it means to", nulls)
		}
		var ids []int64
		for i := len(js) - 1; i >= 0; i -= 2 {
			ids = append(ids, js[i].ID)
		}
		for i := 0; i < len(js); i += 2 {
			ids = append(ids, js[i].ID)
		}
		ids = append(ids, 0, js[len(js)-1].ID+1000, js[3].ID) // none, none, repeated

		got, err := s.QueueJobsByID(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range queueJobFields {
			names = append(names, f.name)
		}
		var read []Job
		if err := s.db.Select(names).Where("id IN ?", ids[:500]).Find(&read).Error; err != nil {
			t.Fatal(err)
		}
		var rest []Job
		if err := s.db.Select(names).Where("id IN ?", ids[500:]).Find(&rest).Error; err != nil {
			t.Fatal(err)
		}
		byID := map[int64]Job{}
		for _, j := range append(read, rest...) {
			byID[j.ID] = j
		}
		var want []Job
		for _, id := range ids {
			if j, ok := byID[id]; ok {
				want = append(want, j)
			}
		}
		if len(got) != len(ids)-2 || len(want) != len(got) {
			t.Fatalf("read %d jobs and gorm %d, want %d", len(got), len(want), len(ids)-2)
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("job %d from QueueJobsByID\n%+v\nfrom gorm\n%+v", want[i].ID, got[i], want[i])
			}
		}
		// Every field read is one a job of the test sets: a field
		// scanned into the wrong place shows as a difference above.
		if !slices.ContainsFunc(got, func(j Job) bool { return j.LastStartAt != nil && len(j.Placement) == 2 && j.HeldGPUs == 1.5 }) {
			t.Error("no running job read with its placement, start and share")
		}
		// Each ID once, shuffled: the jobs are put in order where read.
		uniq := slices.Clone(ids[:len(ids)-1])
		rand.Shuffle(len(uniq), func(i, k int) { uniq[i], uniq[k] = uniq[k], uniq[i] })
		got, err = s.QueueJobsByID(ctx, uniq)
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, id := range uniq {
			j, ok := byID[id]
			if !ok {
				continue
			}
			if k >= len(got) || !reflect.DeepEqual(got[k], j) {
				t.Fatalf("job %d of %d unique IDs: not job %d as gorm reads it", k, len(uniq), id)
			}
			k++
		}
		if k != len(got) {
			t.Errorf("%d jobs read of %d unique IDs, want %d", len(got), len(uniq), k)
		}
		if none, err := s.QueueJobsByID(ctx, nil); err != nil || none != nil {
			t.Errorf("no IDs: %v, %v", none, err)
		}
	})
}

// TestStringsScan: Strings reads its JSON as json.Unmarshal does, the
// empty list without it.
func TestStringsScan(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   any
		want Strings
	}{
		{nil, nil},
		{"null", nil},
		{"[]", Strings{}},
		{[]byte("[]"), Strings{}},
		{`["a","b \"c\""]`, Strings{"a", `b "c"`}},
		{[]byte(`["x"]`), Strings{"x"}},
	} {
		s := Strings{"left", "over"}
		if err := s.Scan(tc.in); err != nil {
			t.Errorf("%v: %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(s, tc.want) || (s == nil) != (tc.want == nil) {
			t.Errorf("%v: %#v, want %#v", tc.in, s, tc.want)
		}
	}
	var s Strings
	if err := s.Scan(`{"a":1}`); err == nil {
		t.Error("an object read as a list")
	}
	if err := s.Scan(3); err == nil {
		t.Error("a number read as a list")
	}
}

// TestPlaceInOrder: jobs read in any order come out in that of their
// places, each moved once, whatever the permutation's cycles.
func TestPlaceInOrder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 33))
	for n := range 40 {
		for range 20 {
			ids := make([]int64, n)
			for i := range ids {
				ids[i] = int64(1000 + 3*i)
			}
			r.Shuffle(n, func(i, k int) { ids[i], ids[k] = ids[k], ids[i] })
			at := map[int64]int{}
			for i, id := range ids {
				at[id] = 10 * i // places with gaps: IDs asked for that were not read
			}
			js := make([]Job, n)
			for i, k := range r.Perm(n) {
				js[i] = Job{ID: ids[k], Name: fmt.Sprint(ids[k])}
			}
			placeInOrder(js, at)
			for i := range js {
				if js[i].ID != ids[i] || js[i].Name != fmt.Sprint(ids[i]) {
					t.Fatalf("%d jobs: job %d is %d %q, want %d", n, i, js[i].ID, js[i].Name, ids[i])
				}
			}
		}
	}
}

// TestQueueRowsReadAsGormReads: readQueueRows, which scans its columns
// itself, reads the rows as gorm's Scan of the same columns did, on both
// databases: fractional queue entries (PostgreSQL's numeric), held and
// stalled jobs, NULL where a column takes one, and a bounded step.
func TestQueueRowsReadAsGormReads(t *testing.T) {
	migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openTestStore(t, dsn)
		now := time.Now().Truncate(time.Microsecond)
		var js []Job
		for i := range 50 {
			js = append(js, Job{Name: fmt.Sprintf("job-%d", i), Team: []string{"vision", "nlp"}[i%2], User: "alice", GPUs: 1 + i%3,
				State: UnfinishedStates[i%3], SubmittedAt: now.Add(-time.Duration(i) * time.Minute), QueueIndex: i % 4,
				QueueSince: float64(i) / 7, RequeueStalls: i % 5, HoldReason: []string{"", "alice's account was disabled"}[i%2]})
		}
		if err := s.db.Create(&js).Error; err != nil {
			t.Fatal(err)
		}
		nulls := 0
		for i, col := range []string{"name", "team", "state", "queue_index", "queue_since", "submitted_at", "requeue_stalls", "hold_reason"} {
			if s.db.Exec("UPDATE jobs SET "+col+" = NULL WHERE id = ?", js[i].ID).Error == nil {
				nulls++
			}
		}
		t.Logf("%d of 8 columns took NULL", nulls)
		for _, tc := range []struct {
			limit int
			where string
			args  []any
		}{
			{0, "state IN ?", []any{UnfinishedStates}},
			{0, "1 = 1", nil},
			{7, "id > ?", []any{js[3].ID}},
		} {
			got, err := s.readQueueRows(ctx, tc.limit, tc.where, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			var want []QueueRow
			gpus := s.db.NamingStrategy.ColumnName("jobs", "GPUs")
			q := s.db.Model(&Job{}).Select("id, name, team, jobs."+quoteUser(s.db)+", "+gpus+", state, queue_index, queue_since, submitted_at, requeue_stalls, hold_reason").
				Where(tc.where, tc.args...).Order("id")
			if tc.limit > 0 {
				q = q.Limit(tc.limit)
			}
			if err := q.Scan(&want).Error; err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 || !reflect.DeepEqual(got, want) {
				t.Errorf("%s (limit %d): read\n%+v\ngorm\n%+v", tc.where, tc.limit, got, want)
			}
		}
	})
}
