package app

import (
	"time"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/sched"
)

// fakeJobEngine is an engine that has made no pass yet: no waits, no
// forecasts, no reservations, and a default scheduler.
type fakeJobEngine struct {
	sched *sched.Scheduler
}

func (fakeJobEngine) Waits() map[int64]sched.Wait                { return nil }
func (fakeJobEngine) Forecast(int64) (engine.JobForecast, bool)  { return engine.JobForecast{}, false }
func (fakeJobEngine) Forecasts() map[int64]engine.JobForecast    { return nil }
func (fakeJobEngine) ForecastInfo() engine.ForecastInfo          { return engine.ForecastInfo{} }
func (fakeJobEngine) PassInterval() time.Duration                { return time.Second }
func (fakeJobEngine) HeldExits() map[int64]engine.HeldExit       { return nil }
func (fakeJobEngine) StoppingRuns() map[int64]engine.StoppingRun { return nil }
func (fakeJobEngine) GoneNodes() []engine.GoneNode               { return nil }
func (fakeJobEngine) FairShare() []sched.TeamShare               { return nil }
func (fakeJobEngine) Borrowed(int64) bool                        { return false }
func (fakeJobEngine) Reclaimable(int64) (time.Time, bool)        { return time.Time{}, false }
func (fakeJobEngine) JobResources(int64) (engine.JobResources, bool) {
	return engine.JobResources{}, false
}
func (fakeJobEngine) HalfLifeS() float64 { return 0 }
func (fakeJobEngine) Reservation(int64) (sched.Reservation, time.Time, bool) {
	return sched.Reservation{}, time.Time{}, false
}
func (e fakeJobEngine) Scheduler() *sched.Scheduler {
	if e.sched == nil {
		s, err := sched.New(sched.Config{Policy: "fifo"})
		if err != nil {
			panic(err)
		}
		return s
	}
	return e.sched
}
