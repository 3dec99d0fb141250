package trace

import (
	"math"
	"strings"
	"testing"
)

// checkJobs holds every reader to the promises the simulator relies on.
func checkJobs(t *testing.T, tr *Trace) {
	t.Helper()
	ids := map[int64]bool{}
	for _, j := range tr.Jobs {
		if j.GPUs < 1 || j.GPUMilli < 1 || j.GPUMilli > 1000 {
			t.Fatalf("job %+v: bad GPU demand", j)
		}
		for _, v := range []float64{j.Submit, j.Duration} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("job %+v: bad time %v", j, v)
			}
		}
		if ids[j.ID] {
			t.Fatalf("job id %d twice", j.ID)
		}
		ids[j.ID] = true
	}
	if len(tr.Jobs) == 0 {
		t.Fatal("a trace without jobs was accepted")
	}
}

func FuzzReadTiresias(f *testing.F) {
	f.Add("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,1,0,606,vgg19,164,30\n1,8,30,133,vgg11,147,23\n")
	f.Add("job_id,num_gpu,submit_time,duration\r\n3,2,1e3,0.5\r\n")
	f.Add("job_id,num_gpu,submit_time,duration\n3,2,-1,5\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ReadTiresias(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.csv") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		checkJobs(t, tr)
	})
}

func FuzzReadOpenB(f *testing.F) {
	h := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
	f.Add(h + "p0,12000,16384,1,460,,LS,Running,0,12537496,0\n")
	f.Add(h + "p0,12000,16384,1,460,,LS,Pending,0,12537496,\np1,1,1,2,1000,,BE,Failed,5,9,6\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ReadOpenB(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.csv") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		checkJobs(t, tr)
	})
}

// FuzzReadNative also checks that what ReadNative accepts, WriteNative
// writes back to the same jobs.
func FuzzReadNative(f *testing.F) {
	f.Add("id,submit_s,duration_s,gpus\n1,0,10,2\n")
	f.Add("# c\nid,name,submit_s,duration_s,gpus,gpu_milli,gpu_mem_mib,cpu_milli,mem_mib,team,user,model\n" +
		"7,\"a, b\",1.25,3600,4,500,30000,16000,65536,nlp,ada,bert\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ReadNative(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.csv") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		checkJobs(t, tr)
		var b strings.Builder
		if err := WriteNative(&b, tr.Jobs); err != nil {
			t.Fatal(err)
		}
		back, err := ReadNative(strings.NewReader(b.String()), "back.csv")
		if err != nil {
			t.Fatalf("re-read: %v\n%s", err, b.String())
		}
		for i := range tr.Jobs {
			if back.Jobs[i] != tr.Jobs[i] {
				t.Fatalf("round trip: %+v became %+v", tr.Jobs[i], back.Jobs[i])
			}
		}
	})
}
