package web

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/models"
)

var (
	jobsDesc = prometheus.NewDesc("gpuportal_jobs", "Jobs by state.", []string{"state"}, nil)
	gpusDesc = prometheus.NewDesc("gpuportal_gpus", "GPUs of connected nodes by state (busy: some job holds memory on it).", []string{"state"}, nil)
	gpuMem   = prometheus.NewDesc("gpuportal_gpu_memory_used_bytes", "GPU memory in use.", []string{"node", "gpu"}, nil)
)

// collector reads its figures when scraped, so they are never stale.
type collector struct {
	store  *models.Store
	engine *engine.Engine
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- gpusDesc
	ch <- gpuMem
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if counts, err := c.store.CountJobsByState(ctx); err == nil {
		for _, st := range job.States {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
		}
	} else {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
	}
	busy, idle := 0, 0
	now := time.Now()
	for _, n := range c.engine.Nodes() {
		for _, smp := range n.Sample(now) {
			if len(smp.Jobs) > 0 {
				busy++
			} else {
				idle++
			}
			ch <- prometheus.MustNewConstMetric(gpuMem, prometheus.GaugeValue, float64(smp.MemUsedMiB)*(1<<20),
				n.Name(), strconv.Itoa(smp.Index))
		}
	}
	ch <- prometheus.MustNewConstMetric(gpusDesc, prometheus.GaugeValue, float64(busy), "busy")
	ch <- prometheus.MustNewConstMetric(gpusDesc, prometheus.GaugeValue, float64(idle), "idle")
}
