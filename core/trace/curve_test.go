package trace

import (
	"strings"
	"testing"
)

func TestNativeSensitivityColumns(t *testing.T) {
	in := "id,submit_s,duration_s,gpus,model,batch,cpu_curve,mem_curve\n" +
		"1,0,10,2,resnet50,256, 0:0 ; 3:0.42;12:1 ,0:0.6;160:1\n" +
		"2,0,10,1,bert,,,\n"
	tr, err := ReadNative(strings.NewReader(in), "n.csv")
	if err != nil {
		t.Fatal(err)
	}
	j := tr.Jobs[0]
	if j.Batch != 256 || j.CPUCurve != "0:0;3:0.42;12:1" || j.MemCurve != "0:0.6;160:1" {
		t.Fatalf("job 1 = %+v", j)
	}
	if k := tr.Jobs[1]; k.Batch != 0 || k.CPUCurve != "" || k.MemCurve != "" {
		t.Fatalf("job 2 = %+v, want no batch and no curves", k)
	}
	var b strings.Builder
	if err := WriteNative(&b, tr.Jobs); err != nil {
		t.Fatal(err)
	}
	back, err := ReadNative(strings.NewReader(b.String()), "back.csv")
	if err != nil || back.Jobs[0] != j || back.Jobs[1] != tr.Jobs[1] {
		t.Fatalf("round trip: %v, %+v\n%s", err, back, b.String())
	}
}

func TestParseCurveErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"3", "want x:speed"},
		{"0:0;x:1", "x \"x\""},
		{"0:1.5", "not in [0, 1]"},
		{"3:0.1;2:0.5", "does not increase"},
		{"0:0.5;2:0.2", "falls"},
		{"-1:0", "0 or more"},
	} {
		if _, err := ParseCurve(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseCurve(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
	in := "id,submit_s,duration_s,gpus,cpu_curve\n1,0,10,1,0:0.5;1:0.2\n"
	if _, err := ReadNative(strings.NewReader(in), "n.csv"); err == nil || !strings.Contains(err.Error(), "cpu_curve") {
		t.Fatalf("bad curve: error %v does not name the column", err)
	}
}
