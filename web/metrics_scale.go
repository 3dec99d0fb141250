package web

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// What /metrics says of the live stream and the store at scale: the rows
// the store writes, and how old the newest live update's oldest reading
// was. The machine reports the live publisher and the history writer
// dropped are told by their own collectors (Config.Collectors).

// scaleStats is counted by the live stream (ws.go); the live publisher
// and the history writer count what they drop (their Collectors).
type scaleStats struct {
	// liveAge is the age, in nanoseconds, of the oldest reading of the
	// last live update when it went out.
	liveAge atomic.Int64
}

var storeWritesDesc = prometheus.NewDesc("gpuportal_store_rows_written_total",
	"Rows the store wrote since the server started, by kind (job: submissions; gpu_history: GPU history minutes; wait_reason: waiting jobs' reasons the engine changed); rate() gives the write rate.",
	[]string{"kind"}, nil)

// storeWrites reports the store's write counts.
type storeWrites struct{ s *Server }

func (c storeWrites) Describe(ch chan<- *prometheus.Desc) { ch <- storeWritesDesc }

func (c storeWrites) Collect(ch chan<- prometheus.Metric) {
	writes := c.s.app.StoreWrites()
	for _, kind := range []string{"job", "gpu_history", "wait_reason"} {
		ch <- counter(storeWritesDesc, float64(writes[kind]), kind)
	}
}

func scaleMetrics(s *Server) []prometheus.Collector {
	return []prometheus.Collector{
		storeWrites{s: s},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gpuportal_live_update_age_seconds",
			Help: "How old the oldest machine reading of the last live update was when it went out (about 1 s while the stream keeps up)."},
			func() float64 { return time.Duration(s.scale.liveAge.Load()).Seconds() }),
	}
}
