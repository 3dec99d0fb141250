package models_test

import (
	"context"
	"testing"

	"github.com/gpuportal/gpuportal/models"
)

// TestLatestForecastsOf: the latest forecasts of the jobs asked for, and
// only theirs, however many jobs are asked for at once (more than one
// query's worth here), and none of another kind.
func TestLatestForecastsOf(t *testing.T) {
	t.Parallel()
	models.Migrated.ForEachDB(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := openStore(t, dsn)
		var rows []models.Forecast
		for id := int64(1); id <= 1200; id++ {
			rows = append(rows, models.Forecast{JobID: id, MadeAt: t0, State: "likely", Reason: "r"})
		}
		if err := s.SetLatestForecasts(ctx, rows); err != nil {
			t.Fatal(err)
		}
		if err := s.AddForecasts(ctx, []models.Forecast{{JobID: 2000, Kind: "first", MadeAt: t0, State: "likely"}}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			ids  []int64
			want int
		}{
			{"none", nil, 0},
			{"one", []int64{7}, 1},
			{"missing", []int64{5000}, 0},
			{"another kind", []int64{2000}, 0},
			{"many", idsFrom(600, 1400), 601},
		} {
			got, err := s.LatestForecastsOf(ctx, tc.ids)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Errorf("%s: %d forecasts, want %d", tc.name, len(got), tc.want)
			}
			for id, f := range got {
				if f.JobID != id || f.Kind != models.ForecastKindLatest || f.State != "likely" {
					t.Errorf("%s: job %d's forecast = %+v", tc.name, id, f)
				}
			}
		}
	})
}

// idsFrom is from, from+1, ..., to.
func idsFrom(from, to int64) []int64 {
	var out []int64
	for id := from; id <= to; id++ {
		out = append(out, id)
	}
	return out
}
