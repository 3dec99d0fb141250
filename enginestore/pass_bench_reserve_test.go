package enginestore

import (
	"os"
	"strconv"

	"github.com/gpuportal/gpuportal/core/sched"
)

// The engine benchmark reserves as serve does by default (--reserve-after
// 5m): every queued job was submitted an hour before, so the first that
// cannot start holds a reservation in every pass. GPUPORTAL_BENCH_RESERVE
// sets the bound in seconds, 0 for none.
func init() {
	bound := 300.0
	if v := os.Getenv("GPUPORTAL_BENCH_RESERVE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0) {
			panic("GPUPORTAL_BENCH_RESERVE=" + strconv.Quote(v) + ": want seconds, 0 for no reservations")
		}
		bound = f
	}
	benchSched = func(c *sched.Config) { c.ReserveAfterS = bound }
}
