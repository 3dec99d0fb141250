package trace

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseTeams(t *testing.T) {
	got, err := ParseTeams("vision:16:1, nlp:8:2.5:4,ops:0")
	if err != nil {
		t.Fatal(err)
	}
	want := []Team{{Name: "vision", GuaranteeGPUs: 16, Weight: 1}, {Name: "nlp", GuaranteeGPUs: 8, Weight: 2.5, MaxGPUsPerUser: 4}, {Name: "ops", Weight: 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	bad := map[string]string{
		"":             "no teams",
		"vision":       "want NAME:GUARANTEED_GPUS",
		":4":           "name is empty",
		"a:4,a:2":      "appears twice",
		"a:-1":         "guarantee",
		"a:x":          "guarantee",
		"a:4:0":        "weight",
		"a:4:NaN":      "weight",
		"a:4:1:-2":     "cap per user",
		"a:4:1:2:9":    "want NAME:GUARANTEED_GPUS",
		"a:99999999:1": "guarantee",
	}
	for spec, want := range bad {
		if _, err := ParseTeams(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTeams(%q): error %v, want one mentioning %q", spec, err, want)
		}
	}
}

func TestReadTeams(t *testing.T) {
	in := "# teams\nteam,guaranteed_gpus,weight,max_gpus_per_user\nvision,16,,\nnlp,8,2,4\n"
	got, err := ReadTeams(strings.NewReader(in), "teams.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Team{{Name: "vision", GuaranteeGPUs: 16, Weight: 1}, {Name: "nlp", GuaranteeGPUs: 8, Weight: 2, MaxGPUsPerUser: 4}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	bad := map[string]string{
		"team\nvision\n":                                   "teams.csv:1: header lacks column(s) guaranteed_gpus",
		"team,guaranteed_gpus,gpu\nv,1,2\n":                "teams.csv:1: column gpu: unknown column",
		"team,guaranteed_gpus\nv,1\nv,2\n":                 "teams.csv:3: column team: team \"v\" already named on line 2",
		"team,guaranteed_gpus\n,1\n":                       "teams.csv:2: column team: empty team name",
		"team,guaranteed_gpus\nv,-1\n":                     "teams.csv:2: column guaranteed_gpus",
		"team,guaranteed_gpus,weight\nv,1,0\n":             "teams.csv:2: column weight",
		"team,guaranteed_gpus,weight\nv,1,x\n":             "teams.csv:2: column weight",
		"team,guaranteed_gpus\n":                           "teams.csv: no teams",
		"team,guaranteed_gpus,max_gpus_per_user\nv,1,-3\n": "teams.csv:2: column max_gpus_per_user",
	}
	for in, want := range bad {
		if _, err := ReadTeams(strings.NewReader(in), "teams.csv"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadTeams(%q): error %v, want %q", in, err, want)
		}
	}
}

func TestLoadTeams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "teams.csv")
	if err := os.WriteFile(path, []byte("team,guaranteed_gpus\na,3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadTeams(path); err != nil || len(got) != 1 || got[0].GuaranteeGPUs != 3 {
		t.Errorf("file: %+v, %v", got, err)
	}
	if got, err := LoadTeams("a:3:2"); err != nil || len(got) != 1 || got[0].Weight != 2 {
		t.Errorf("spec: %+v, %v", got, err)
	}
	if _, err := LoadTeams("no-such-file.csv"); err == nil || !strings.Contains(err.Error(), "neither a team file") {
		t.Errorf("neither: %v", err)
	}
}

func TestParseDuration(t *testing.T) {
	good := map[string]float64{"3600": 3600, "90.5": 90.5, "600s": 600, "90m": 5400, "168h": 604800, "7d": 604800, "0": 0, " 2d ": 172800}
	for in, want := range good {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "-1", "-2h", "NaN", "Inf", "1w", "7 days"} {
		if _, err := ParseDuration(in); err == nil {
			t.Errorf("ParseDuration(%q) succeeds", in)
		}
	}
}

func TestAssignTeams(t *testing.T) {
	jobs := make([]Job, 10000)
	for i := range jobs {
		jobs[i].ID = int64(i)
	}
	jobs[7].Team = "ops"
	n, err := AssignTeams(jobs, "vision:60, nlp:30,speech:10")
	if err != nil || n != len(jobs)-1 {
		t.Fatalf("assigned %d, %v", n, err)
	}
	count := map[string]int{}
	for _, j := range jobs {
		count[j.Team]++
	}
	// Within 3% of the shares, and the job that had a team keeps it.
	for team, want := range map[string]float64{"vision": 0.6, "nlp": 0.3, "speech": 0.1} {
		if got := float64(count[team]) / float64(len(jobs)); got < want-0.03 || got > want+0.03 {
			t.Errorf("%s has %v of the jobs, want about %v", team, got, want)
		}
	}
	if jobs[7].Team != "ops" || count["ops"] != 1 {
		t.Errorf("job 7 is in %q", jobs[7].Team)
	}
	again := make([]Job, len(jobs))
	for i := range again {
		again[i].ID = int64(i)
	}
	AssignTeams(again, "vision:60,nlp:30,speech:10")
	for i := range jobs {
		if i != 7 && again[i].Team != jobs[i].Team {
			t.Fatalf("job %d: %s, then %s: the split is not reproducible", i, jobs[i].Team, again[i].Team)
		}
	}
	for _, bad := range []string{"", "vision", "vision:0", "vision:-1", "a:1,a:2", ":3"} {
		if _, err := AssignTeams(nil, bad); err == nil {
			t.Errorf("AssignTeams(%q) succeeds", bad)
		}
	}
}
