package simcmd

import (
	"flag"
	"fmt"
)

// dbFlags are sim's flags for a what-if on the cluster's own history:
// `gpuportal sim --from-db` (docs/simulator.md, "What-if on the cluster's
// own history").
type dbFlags struct {
	on bool
	DBQuery
	whatIfFlag map[string]bool // flags that only --from-db reads
}

func (f *dbFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "from-db", false, "replay the cluster's own jobs, those finished in the last --days, from its database (--db or --data, as serve), beside what actually happened")
	fs.StringVar(&f.Data, "data", "./data", "with --from-db: data folder of the SQLite database, as serve's")
	fs.StringVar(&f.DB, "db", "", `with --from-db: database, "sqlite:PATH" or a "postgres://..." URL (default: SQLite in --data), as serve's`)
	fs.IntVar(&f.Days, "days", 7, "with --from-db: replay the jobs finished in the last `N` days")
	fs.StringVar(&f.Export, "export", "", "with --from-db: also write the jobs as a native trace to this CSV `file`")
	fs.IntVar(&f.MaxJobs, "max-jobs", 0, "with --from-db: replay at most the `N` most recent jobs; 0: all")
	f.whatIfFlag = map[string]bool{"data": true, "db": true, "days": true, "export": true, "max-jobs": true}
}

// check refuses flags that do not go together with --from-db or without it.
func (f *dbFlags) check(set map[string]bool) error {
	if !f.on {
		for name := range set {
			if f.whatIfFlag[name] {
				return fmt.Errorf("sim: --%s needs --from-db", name)
			}
		}
		return nil
	}
	for _, name := range []string{"trace", "format", "assign-teams", "forecast", "forecast-every", "forecast-arrivals", "jitter-seed"} {
		if set[name] {
			return fmt.Errorf("sim: --%s does not go with --from-db: the jobs come from the database", name)
		}
	}
	if f.Days < 1 || f.Days > 3660 {
		return fmt.Errorf("sim: --days %d: want 1 to 3660 days", f.Days)
	}
	if f.MaxJobs < 0 {
		return fmt.Errorf("sim: --max-jobs %d: want 0 (all) or more", f.MaxJobs)
	}
	return nil
}
