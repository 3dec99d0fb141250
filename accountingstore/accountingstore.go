// Package accountingstore is core/accounting over the store's rows: the
// store (package models) keeps runs, GPU history and closed days as rows
// and measures nothing itself, and this package converts its rows into
// core/accounting's values and back, as enginestore does for the engine.
package accountingstore

import (
	"context"
	"time"

	"github.com/gpuportal/gpuportal/core/accounting"
	"github.com/gpuportal/gpuportal/models"
)

// Reader is what a report reads; *models.Store is one.
type Reader interface {
	Accounting(ctx context.Context, from, to, now time.Time, idleBelow float64, measure models.MeasureDays) (*models.Accounting, error)
}

// Closer is what closing days writes; *models.Store is one.
type Closer interface {
	CloseAccountingDays(ctx context.Context, now time.Time, idleBelow float64, max int, measure models.MeasureDays) (int, error)
}

// Input is what a report of a span of days is built from
// (accounting.Build): each day's GPU time per team and user, and the jobs
// and runs whose outcomes and waits fall in the span.
type Input struct {
	Days map[accounting.Day]map[accounting.Key]accounting.Usage
	Jobs []accounting.Job
	Runs []accounting.Run
}

// Read loads what a report of the UTC days [from, to) needs, as of now
// (models.Store.Accounting): closed days as written, the others measured
// with idleBelow (0 to 1).
func Read(ctx context.Context, st Reader, from, to, now time.Time, idleBelow float64) (Input, error) {
	a, err := st.Accounting(ctx, from, to, now, idleBelow, MeasureDays)
	if err != nil {
		return Input{}, err
	}
	in := Input{Days: usages(a.Days), Jobs: make([]accounting.Job, len(a.Jobs)), Runs: runs(a.Runs)}
	for i, j := range a.Jobs {
		in.Jobs[i] = accounting.Job(j)
	}
	return in, nil
}

// CloseDays writes the days that have closed since the last one written,
// at most max of them (models.Store.CloseAccountingDays), and returns how
// many it closed.
func CloseDays(ctx context.Context, st Closer, now time.Time, idleBelow float64, max int) (int, error) {
	return st.CloseAccountingDays(ctx, now, idleBelow, max, MeasureDays)
}

// MeasureDays is accounting.Measure over the store's rows: it is the
// models.MeasureDays the store is given.
func MeasureDays(rs []models.AccountingRun, ss []models.AccountingSample, from, to, now time.Time, idleBelow float64) map[time.Time]map[models.AccountingKey]models.AccountingUsage {
	samples := make([]accounting.Sample, len(ss))
	for i, s := range ss {
		samples[i] = accounting.Sample(s)
	}
	m := accounting.Measure(runs(rs), samples, from, to, now, idleBelow)
	out := make(map[time.Time]map[models.AccountingKey]models.AccountingUsage, len(m))
	for d, byKey := range m {
		o := make(map[models.AccountingKey]models.AccountingUsage, len(byKey))
		for k, u := range byKey {
			o[models.AccountingKey(k)] = models.AccountingUsage(u)
		}
		out[d] = o
	}
	return out
}

func runs(rs []models.AccountingRun) []accounting.Run {
	out := make([]accounting.Run, len(rs))
	for i, r := range rs {
		out[i] = accounting.Run(r)
	}
	return out
}

func usages(m map[time.Time]map[models.AccountingKey]models.AccountingUsage) map[accounting.Day]map[accounting.Key]accounting.Usage {
	out := make(map[accounting.Day]map[accounting.Key]accounting.Usage, len(m))
	for d, byKey := range m {
		o := make(map[accounting.Key]accounting.Usage, len(byKey))
		for k, u := range byKey {
			o[accounting.Key(k)] = accounting.Usage(u)
		}
		out[d] = o
	}
	return out
}
