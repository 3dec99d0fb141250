package wire

import (
	"github.com/gpuportal/gpuportal/core/job"

	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestRunningGPUsCrossTheWire(t *testing.T) {
	gpus := []GPU{{Index: 0, MemMiB: 1}, {Index: 1, MemMiB: 1}, {Index: 2, MemMiB: 1}}
	in := Hello{Version: Version, Agent: "a", Nodes: []Node{{Name: "n1", GPUs: gpus, Running: []job.RunRef{{Job: 7, Run: 1}, {Job: 8, Run: 2}},
		RunningGPUs: []JobGPUs{{JobID: 7, Run: 1, GPUs: []int{0, 2}}, {JobID: 8, Run: 2, GPUs: []int{1}}}}}}
	b, err := json.Marshal(Message{Type: TypeHello, Hello: &in})
	if err != nil {
		t.Fatal(err)
	}
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*m.Hello, in) {
		t.Errorf("hello = %+v, want %+v", *m.Hello, in)
	}
	if err := CheckRunningGPUs(m.Hello.Nodes[0]); err != nil {
		t.Error(err)
	}

	b, err = json.Marshal(Node{Name: "n1", Running: []job.RunRef{}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "running_gpus") {
		t.Errorf("node without GPU list = %s, want the field left out", b)
	}
}

func TestCheckRunningGPUs(t *testing.T) {
	gpus := []GPU{{Index: 0, MemMiB: 1}, {Index: 1, MemMiB: 1}}
	for _, tc := range []struct {
		name string
		list []JobGPUs
		want string // part of the error; empty: none
	}{
		{"none", nil, ""},
		{"own GPUs", []JobGPUs{{JobID: 7, Run: 1, GPUs: []int{1}}}, ""},
		{"no GPUs", []JobGPUs{{JobID: 7, Run: 1, GPUs: []int{}}}, ""},
		{"job not running", []JobGPUs{{JobID: 9, Run: 1, GPUs: []int{0}}}, "job 9 run 1 is not running"},
		{"job twice", []JobGPUs{{JobID: 7, Run: 1, GPUs: []int{0}}, {JobID: 7, Run: 1, GPUs: []int{1}}}, "listed twice"},
		{"GPU beyond the machine", []JobGPUs{{JobID: 7, Run: 1, GPUs: []int{2}}}, "GPU 2"},
		{"negative GPU", []JobGPUs{{JobID: 7, Run: 1, GPUs: []int{-1}}}, "GPU -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckRunningGPUs(Node{Name: "n1", GPUs: gpus, Running: []job.RunRef{{Job: 7, Run: 1}}, RunningGPUs: tc.list})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
