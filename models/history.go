package models

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/gpuhist"
)

// GPU history steps: a minute for recent history, an hour once rolled up.
const (
	StepMinute = 60
	StepHour   = 3600
)

// GPUHistory is one GPU's readings over one minute, or over one hour once
// minutes older than the raw retention are rolled up. Table gpu_history.
type GPUHistory struct {
	Step  int    `gorm:"column:step;primaryKey;autoIncrement:false"`  // seconds: StepMinute or StepHour
	Start int64  `gorm:"column:start;primaryKey;autoIncrement:false"` // Unix seconds, a multiple of Step
	GPU   string `gorm:"column:gpu;primaryKey;size:64"`               // the GPU's UUID
	Node  string `gorm:"column:node;size:64;not null"`
	// GPUIndex is the GPU's index on its node.
	GPUIndex int `gorm:"column:gpu_index;not null"`
	// Samples is how many per-second readings the row holds.
	Samples       int     `gorm:"column:samples;not null"`
	MemMiB        int64   `gorm:"column:mem_mib"`
	MemUsedAvgMiB float64 `gorm:"column:mem_used_avg_mib"`
	MemUsedMaxMiB int64   `gorm:"column:mem_used_max_mib"`
	UtilAvgPct    float64 `gorm:"column:util_avg_pct"`
	// BusySamples counts the readings with a job on the GPU.
	BusySamples int `gorm:"column:busy_samples"`
	// PowerAvgW and TempAvgC are NULL where the GPU does not report them.
	PowerAvgW *float64 `gorm:"column:power_avg_w"`
	TempAvgC  *float64 `gorm:"column:temp_avg_c"`
}

// TableName names GPUHistory's table.
func (GPUHistory) TableName() string { return "gpu_history" }

// ClusterHistory is the number of jobs in each waiting or running state
// at the end of one minute. Table cluster_history.
type ClusterHistory struct {
	Start     int64 `gorm:"primaryKey;autoIncrement:false"` // Unix seconds, a multiple of a minute
	Queued    int
	Running   int
	Preempted int
}

// TableName names ClusterHistory's table.
func (ClusterHistory) TableName() string { return "cluster_history" }

// HistoryFromAggregate is the row for one downsampled bucket of GPU uuid.
func HistoryFromAggregate(uuid string, a gpuhist.Aggregate) GPUHistory {
	h := GPUHistory{Step: int(a.Step), Start: a.Start, GPU: uuid, Node: a.GPU.Node, GPUIndex: a.GPU.Index,
		Samples: a.Samples, MemMiB: a.MemMiB, MemUsedAvgMiB: a.MemUsedAvgMiB, MemUsedMaxMiB: a.MemUsedMaxMiB,
		UtilAvgPct: a.UtilAvgPct, BusySamples: a.BusySamples}
	if a.PowerSamples > 0 {
		p := a.PowerAvgW
		h.PowerAvgW = &p
	}
	if a.TempSamples > 0 {
		c := a.TempAvgC
		h.TempAvgC = &c
	}
	return h
}

// Aggregate is the row as a downsampled bucket. Power and temperature
// count as read by every sample where the row has them.
func (h GPUHistory) Aggregate() gpuhist.Aggregate {
	a := gpuhist.Aggregate{GPU: gpu.Ref{Node: h.Node, Index: h.GPUIndex}, Start: h.Start, Step: int64(h.Step),
		Samples: h.Samples, MemMiB: h.MemMiB, MemUsedAvgMiB: h.MemUsedAvgMiB, MemUsedMaxMiB: h.MemUsedMaxMiB,
		UtilAvgPct: h.UtilAvgPct, BusySamples: h.BusySamples}
	if h.PowerAvgW != nil {
		a.PowerAvgW, a.PowerSamples = *h.PowerAvgW, h.Samples
	}
	if h.TempAvgC != nil {
		a.TempAvgC, a.TempSamples = *h.TempAvgC, h.Samples
	}
	return a
}

type historyKey struct {
	step  int
	start int64
	gpu   string
}

// SaveGPUHistory stores rows, merging each with a row already stored for
// the same GPU, step and start (a minute written before a restart).
func (s *Store) SaveGPUHistory(ctx context.Context, rows []GPUHistory) error {
	if len(rows) == 0 {
		return nil
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return saveGPUHistory(tx, rows, s.rowsPerInsert()) })
	if err != nil {
		return fmt.Errorf("save GPU history: %w", err)
	}
	s.writes.add("gpu_history", len(rows))
	return nil
}

func saveGPUHistory(tx *gorm.DB, rows []GPUHistory, batch int) error {
	merged := make(map[historyKey]GPUHistory, len(rows))
	var order []historyKey
	starts, gpus := map[int64]bool{}, map[string]bool{}
	for _, r := range rows {
		k := historyKey{r.Step, r.Start, r.GPU}
		if cur, ok := merged[k]; ok {
			r = mergeHistory(cur, r)
		} else {
			order = append(order, k)
		}
		merged[k] = r
		starts[r.Start], gpus[r.GPU] = true, true
	}
	var existing []GPUHistory
	err := tx.Where("start IN ? AND gpu IN ?", keys(starts), keys(gpus)).Find(&existing).Error
	if err != nil {
		return err
	}
	for _, e := range existing {
		k := historyKey{e.Step, e.Start, e.GPU}
		if r, ok := merged[k]; ok {
			merged[k] = mergeHistory(e, r)
		}
	}
	out := make([]GPUHistory, 0, len(order))
	for _, k := range order {
		out = append(out, merged[k])
	}
	return tx.Clauses(clause.OnConflict{UpdateAll: true}).CreateInBatches(&out, batch).Error
}

// mergeHistory combines two rows of one GPU and bucket; the newer row's
// node and index win.
func mergeHistory(old, cur GPUHistory) GPUHistory {
	m := HistoryFromAggregate(cur.GPU, old.Aggregate().Merge(cur.Aggregate()))
	m.Node, m.GPUIndex = cur.Node, cur.GPUIndex
	return m
}

func keys[K comparable](m map[K]bool) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// GPUHistoryRange returns the rows of one GPU (uuid), or of every GPU
// when uuid is empty, whose bucket starts in [from, to), ordered by time.
// Minutes and hours come together: hours where minutes were rolled up.
func (s *Store) GPUHistoryRange(ctx context.Context, uuid string, from, to int64) ([]GPUHistory, error) {
	q := s.db.WithContext(ctx).Where("step IN ? AND start >= ? AND start < ?", []int{StepMinute, StepHour}, from, to)
	if uuid != "" {
		q = q.Where("gpu = ?", uuid)
	}
	var out []GPUHistory
	if err := q.Order("start, gpu").Limit(500000).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("GPU history from %d to %d: %w", from, to, err)
	}
	return out, nil
}

// GPUHistoryOnNodes returns the rows of the GPUs of nodes whose bucket
// starts in [from, to), ordered by time: GPUHistoryRange for the machines
// a few jobs run on, with the utilization and memory only.
func (s *Store) GPUHistoryOnNodes(ctx context.Context, nodes []string, from, to int64) ([]GPUHistory, error) {
	var out []GPUHistory
	err := s.db.WithContext(ctx).Select("step, start, gpu, node, gpu_index, samples, mem_mib, mem_used_avg_mib, util_avg_pct").Where("step IN ? AND start >= ? AND start < ? AND node IN ?", []int{StepMinute, StepHour}, from, to, nodes).
		Order("start, gpu").Limit(500000).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("GPU history of %d machines from %d to %d: %w", len(nodes), from, to, err)
	}
	return out, nil
}

// ClusterGPUPoint is the whole cluster over one stored bucket.
type ClusterGPUPoint struct {
	Step  int
	Start int64
	// GPUs is how many GPUs reported; BusyGPUs their average number with a job.
	GPUs          int     `gorm:"column:gpus"`
	BusyGPUs      float64 `gorm:"column:busy_gpus"`
	MemUsedAvgMiB float64 `gorm:"column:mem_used_avg_mib"`
	MemMiB        int64   `gorm:"column:mem_mib"`
}

// ClusterGPUHistory sums the GPU history of every GPU per bucket starting
// in [from, to), ordered by time.
func (s *Store) ClusterGPUHistory(ctx context.Context, from, to int64) ([]ClusterGPUPoint, error) {
	var out []ClusterGPUPoint
	err := s.db.WithContext(ctx).Model(&GPUHistory{}).
		Select("step, start, count(*) AS gpus, sum(1.0 * busy_samples / samples) AS busy_gpus, sum(mem_used_avg_mib) AS mem_used_avg_mib, sum(mem_mib) AS mem_mib").
		Where("step IN ? AND start >= ? AND start < ? AND samples > 0", []int{StepMinute, StepHour}, from, to).
		Group("step, start").Order("start").Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("cluster GPU history from %d to %d: %w", from, to, err)
	}
	return out, nil
}

// RollupGPUHistory rolls the minutes that start before the hour holding
// before up into hours, one hour at a time, and deletes them. It returns
// the number of minutes rolled up.
func (s *Store) RollupGPUHistory(ctx context.Context, before int64) (int, error) {
	cutoff := before - before%StepHour
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := s.rollupOldestHour(ctx, cutoff)
		if err != nil {
			return total, fmt.Errorf("roll up GPU history before %d: %w", cutoff, err)
		}
		if n == 0 {
			return total, nil
		}
		total += n
	}
}

// rollupOldestHour rolls up the oldest hour before cutoff that still has
// minutes, returning how many.
func (s *Store) rollupOldestHour(ctx context.Context, cutoff int64) (int, error) {
	n := 0
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var oldest GPUHistory
		err := tx.Where("step = ? AND start < ?", StepMinute, cutoff).Order("start").Take(&oldest).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		hour := oldest.Start - oldest.Start%StepHour
		var minutes []GPUHistory
		if err := tx.Where("step = ? AND start >= ? AND start < ?", StepMinute, hour, hour+StepHour).Find(&minutes).Error; err != nil {
			return err
		}
		byGPU := make(map[string][]gpuhist.Aggregate)
		latest := make(map[string]GPUHistory)
		for _, m := range minutes {
			byGPU[m.GPU] = append(byGPU[m.GPU], m.Aggregate())
			if l, ok := latest[m.GPU]; !ok || m.Start > l.Start {
				latest[m.GPU] = m
			}
		}
		var hours []GPUHistory
		for uuid, as := range byGPU {
			for _, a := range gpuhist.Rollup(as, StepHour) {
				h := HistoryFromAggregate(uuid, a)
				h.Node, h.GPUIndex = latest[uuid].Node, latest[uuid].GPUIndex
				hours = append(hours, h)
			}
		}
		if err := saveGPUHistory(tx, hours, s.rowsPerInsert()); err != nil {
			return err
		}
		if err := tx.Where("step = ? AND start >= ? AND start < ?", StepMinute, hour, hour+StepHour).Delete(&GPUHistory{}).Error; err != nil {
			return err
		}
		n = len(minutes)
		return nil
	})
	return n, err
}

// PruneHistory deletes GPU and cluster history that starts before a Unix
// time, returning how many rows went.
func (s *Store) PruneHistory(ctx context.Context, before int64) (int64, error) {
	db := s.db.WithContext(ctx)
	g := db.Where("start < ?", before).Delete(&GPUHistory{})
	if g.Error != nil {
		return 0, fmt.Errorf("prune GPU history before %d: %w", before, g.Error)
	}
	c := db.Where("start < ?", before).Delete(&ClusterHistory{})
	if c.Error != nil {
		return g.RowsAffected, fmt.Errorf("prune cluster history before %d: %w", before, c.Error)
	}
	return g.RowsAffected + c.RowsAffected, nil
}

// SaveClusterHistory stores the job counts of one minute, replacing any
// stored for it.
func (s *Store) SaveClusterHistory(ctx context.Context, h ClusterHistory) error {
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&h).Error; err != nil {
		return fmt.Errorf("save cluster history at %d: %w", h.Start, err)
	}
	return nil
}

// ClusterHistoryRange returns the job counts of the minutes starting in
// [from, to), oldest first.
func (s *Store) ClusterHistoryRange(ctx context.Context, from, to int64) ([]ClusterHistory, error) {
	var out []ClusterHistory
	if err := s.db.WithContext(ctx).Where("start >= ? AND start < ?", from, to).Order("start").Limit(500000).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("cluster history from %d to %d: %w", from, to, err)
	}
	return out, nil
}
