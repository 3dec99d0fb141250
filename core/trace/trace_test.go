package trace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sharedFile returns the path of one of the real traces the repository
// keeps for its tests (testdata/traces/README.md).
func sharedFile(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join("../../testdata/traces", name)
}

func TestReadTiresias(t *testing.T) {
	in := "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\r\n" +
		"0,1,0,606,vgg19,164,30\r\n" +
		"1,8,30.5,133,vgg11,147,23\r\n"
	tr, err := Read(strings.NewReader(in), "t.csv", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: 0, Name: "0", Submit: 0, Duration: 164, GPUs: 1, GPUMilli: 1000, Model: "vgg19"},
		{ID: 1, Name: "1", Submit: 30.5, Duration: 147, GPUs: 8, GPUMilli: 1000, Model: "vgg11"},
	}
	if tr.Format != FormatTiresias || len(tr.Jobs) != len(want) {
		t.Fatalf("got format %s, %d jobs", tr.Format, len(tr.Jobs))
	}
	for i := range want {
		if tr.Jobs[i] != want[i] {
			t.Errorf("job %d = %+v, want %+v", i, tr.Jobs[i], want[i])
		}
	}
}

func TestReadOpenB(t *testing.T) {
	in := "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n" +
		"p0,12000,16384,1,460,,LS,Running,100,1100,150\n" +
		"p1,4000,8192,0,0,,BE,Running,100,200,100\n" +
		"p2,6000,12288,2,1000,,LS,Pending,300,900,\n" +
		"p3,6000,12288,8,1000,,LS,Failed,400,500,410\n"
	tr, err := Read(strings.NewReader(in), "pods.csv", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: 0, Name: "p0", Submit: 100, Duration: 950, GPUs: 1, GPUMilli: 460, CPUMilli: 12000, MemMiB: 16384},
		{ID: 3, Name: "p3", Submit: 400, Duration: 90, GPUs: 8, GPUMilli: 1000, CPUMilli: 6000, MemMiB: 12288},
	}
	if tr.Format != FormatOpenB || len(tr.Jobs) != len(want) {
		t.Fatalf("got format %s, jobs %+v", tr.Format, tr.Jobs)
	}
	for i := range want {
		if tr.Jobs[i] != want[i] {
			t.Errorf("job %d = %+v, want %+v", i, tr.Jobs[i], want[i])
		}
	}
	if tr.Skipped[SkipCPUOnly] != 1 || tr.Skipped[SkipNeverScheduled] != 1 {
		t.Errorf("skipped = %v", tr.Skipped)
	}
}

func TestNativeRoundTrip(t *testing.T) {
	jobs := []Job{
		{ID: 7, Name: "bert, large", Submit: 1.25, Duration: 3600, GPUs: 4, GPUMilli: 1000,
			GPUMemMiB: 30000, CPUMilli: 16000, MemMiB: 65536, Team: "nlp", User: "ada", Model: "bert", TimeLimitS: 7200},
		{ID: 9, Submit: 2, Duration: 0.5, GPUs: 1, GPUMilli: 250, Team: "vision"},
		{ID: 11, Submit: 3, Duration: 1800, GPUs: 1, GPUMilli: 1000, Team: "vision", User: "lin", Class: "session"},
	}
	var b strings.Builder
	if err := WriteNative(&b, jobs); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(strings.NewReader(b.String()), "n.csv", "")
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if tr.Format != FormatNative || len(tr.Jobs) != len(jobs) {
		t.Fatalf("format %s, %d jobs", tr.Format, len(tr.Jobs))
	}
	for i := range jobs {
		if tr.Jobs[i] != jobs[i] {
			t.Errorf("job %d = %+v, want %+v", i, tr.Jobs[i], jobs[i])
		}
	}
}

func TestNativeOptionalColumns(t *testing.T) {
	in := "# exported by hand\n\ngpus,id,duration_s,submit_s\n2,1,10,0\n"
	tr, err := ReadNative(strings.NewReader(in), "n.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := Job{ID: 1, Duration: 10, GPUs: 2, GPUMilli: 1000}
	if len(tr.Jobs) != 1 || tr.Jobs[0] != want {
		t.Fatalf("jobs = %+v, want %+v", tr.Jobs, want)
	}
}

// TestBadRows checks that each kind of bad input is refused with the file,
// the line and, where one is at fault, the column.
func TestBadRows(t *testing.T) {
	const tiresiasHeader = "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
	const nativeHeader = "id,submit_s,duration_s,gpus\n"
	const openbHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
	cases := []struct {
		name   string
		format Format
		in     string
		want   string // substring of the error
	}{
		{"empty file", FormatTiresias, "", "f.csv: empty file"},
		{"header only", FormatTiresias, tiresiasHeader, "f.csv: trace has no jobs"},
		{"missing column", FormatTiresias, "job_id,num_gpu,submit_time\n1,1,0\n", "f.csv:1: header lacks column(s) duration"},
		{"zero GPUs", FormatTiresias, tiresiasHeader + "0,1,0,0,m,5,0\n1,0,0,0,m,5,0\n", "f.csv:3: column num_gpu: 0 is out of range"},
		{"negative duration", FormatTiresias, tiresiasHeader + "0,1,0,0,m,-5,0\n", "f.csv:2: column duration: -5 is negative"},
		{"not a number", FormatTiresias, tiresiasHeader + "0,1,soon,0,m,5,0\n", `f.csv:2: column submit_time: "soon" is not a number`},
		{"NaN", FormatTiresias, tiresiasHeader + "0,1,NaN,0,m,5,0\n", `f.csv:2: column submit_time: "NaN" is not a number`},
		{"infinite", FormatNative, nativeHeader + "1,0,+Inf,1\n", `f.csv:2: column duration_s: "+Inf" is not a number`},
		{"short row", FormatTiresias, tiresiasHeader + "0,1,0\n", "f.csv:2: wrong number of fields"},
		{"duplicate id", FormatTiresias, tiresiasHeader + "4,1,0,0,m,5,0\n\n4,1,0,0,m,5,0\n", "f.csv:4: column job_id: job id 4 already used on line 2"},
		{"unknown native column", FormatNative, "id,submit_s,duration_s,gpus,gpu\n1,0,1,1,1\n", "f.csv:1: column gpu: unknown column"},
		{"native GPU share", FormatNative, "id,submit_s,duration_s,gpus,gpu_milli\n1,0,1,1,1500\n", "f.csv:2: column gpu_milli: 1500 is out of range"},
		{"native class", FormatNative, "id,submit_s,duration_s,gpus,class\n1,0,1,1,interactive\n", `f.csv:2: column class: "interactive" is no class: want batch or session`},
		{"native time limit", FormatNative, "id,submit_s,duration_s,gpus,time_limit_s\n1,0,1,1,-5\n", "f.csv:2: column time_limit_s"},
		{"duplicate header", FormatNative, "id,submit_s,duration_s,gpus,ID\n", "f.csv:1: column id: column appears twice"},
		{"openb deleted before scheduled", FormatOpenB, openbHeader + "p,1,1,1,1000,,LS,Running,10,20,30\n", "f.csv:2: column deletion_time: 20 is before scheduled_time 30"},
		{"openb running never scheduled", FormatOpenB, openbHeader + "p,1,1,1,1000,,LS,Running,10,20,\n", "f.csv:2: column scheduled_time: empty for a pod in phase Running"},
		{"openb only skipped pods", FormatOpenB, openbHeader + "p,1,1,0,0,,LS,Running,10,20,10\n", "f.csv: trace has no jobs"},
		{"undetectable", "", "a,b\n1,2\n", "matches no trace format"},
		{"bare quote", FormatNative, nativeHeader + "1,0,\"5,1\n", "f.csv:2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(c.in), "f.csv", c.format)
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestParseErrorUnwraps(t *testing.T) {
	_, err := Read(strings.NewReader("id,submit_s,duration_s,gpus\n1,0,1,x\n"), "f.csv", FormatNative)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 2 || pe.Column != "gpus" {
		t.Fatalf("error %v is not a ParseError at line 2, column gpus", err)
	}
}

func TestReadFileRefusesMissing(t *testing.T) {
	_, err := ReadFile(filepath.Join(t.TempDir(), "nope.csv"), "")
	if err == nil || !strings.Contains(err.Error(), "nope.csv") {
		t.Fatalf("error %v, want one naming the file", err)
	}
}

func TestSharedTraces(t *testing.T) {
	cases := []struct {
		file   string
		format Format
		jobs   int
	}{
		{"tiresias-60job.csv", FormatTiresias, 60},
		{"openb-last6w-tiresias.csv", FormatTiresias, 6183},
		{"openb-pods.csv", FormatOpenB, 7064 - 861},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			tr, err := ReadFile(sharedFile(t, c.file), "")
			if err != nil {
				t.Fatal(err)
			}
			if tr.Format != c.format || len(tr.Jobs) != c.jobs {
				t.Fatalf("format %s with %d jobs, want %s with %d", tr.Format, len(tr.Jobs), c.format, c.jobs)
			}
		})
	}
}

// TestOpenBMatchesDerivedTrace checks the openb reader against the
// derived Tiresias-format trace: the last 6,183 scheduled GPU pods, by
// creation time, have the same durations and relative submit times.
func TestOpenBMatchesDerivedTrace(t *testing.T) {
	pods, err := ReadFile(sharedFile(t, "openb-pods.csv"), FormatOpenB)
	if err != nil {
		t.Fatal(err)
	}
	derived, err := ReadFile(sharedFile(t, "openb-last6w-tiresias.csv"), FormatTiresias)
	if err != nil {
		t.Fatal(err)
	}
	last := pods.Jobs[len(pods.Jobs)-len(derived.Jobs):]
	first := last[0].Submit
	for i, d := range derived.Jobs {
		p := last[i]
		if p.Submit-first != d.Submit || p.Duration != d.Duration || max(p.GPUs, 1) != d.GPUs {
			t.Fatalf("pod %s (%v, %v s, %d GPUs) != derived job %s (%v, %v s, %d GPUs)",
				p.Name, p.Submit-first, p.Duration, p.GPUs, d.Name, d.Submit, d.Duration, d.GPUs)
		}
	}
}

// TestReadFileSizesByLines checks that ReadFile, which sizes the job list
// by the file's lines, reads what Read reads, blank and comment lines
// included, and that the guess stays within its bounds.
func TestReadFileSizesByLines(t *testing.T) {
	text := "# a comment\n\njob_id,num_gpu,submit_time,iterations,model_name,duration,interval\n" +
		"1,2,0,0,vgg16,100,0\n\n\n2,1,5,0,resnet50,50,0\n# done\n"
	path := filepath.Join(t.TempDir(), "t.csv")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []Format{"", FormatTiresias} {
		got, err := ReadFile(path, f)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Read(strings.NewReader(text), path, f)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Jobs, want.Jobs) || len(got.Jobs) != 2 {
			t.Errorf("format %q: ReadFile read %+v, Read %+v", f, got.Jobs, want.Jobs)
		}
	}
	for _, c := range []struct {
		data string
		want int
	}{
		{"", 0},
		{"a,b,c,d\n", 1},
		{"job_id,num_gpu,submit_time,duration\n1,1,0,0\n2,1,0,0\n", 4},
		{strings.Repeat("\n", 800), 100}, // blank lines: one row per 8 bytes at most
	} {
		if got := rowsHint([]byte(c.data)); got != c.want {
			t.Errorf("rowsHint(%q) = %d, want %d", c.data, got, c.want)
		}
	}
}
