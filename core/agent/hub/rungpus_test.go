package hub

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/job"
)

// TestReconnectingAgentReportsItsRunsGPUs drops an agent's connection
// while a job runs on its GPU 1: the agent says so when it joins again,
// and the machine the engine adopts the run from knows it.
func TestReconnectingAgentReportsItsRunsGPUs(t *testing.T) {
	hub, srv, reg := startHub(t, false)
	startClient(t, srv.URL, nil, "gpu-a")
	n := waitNode(t, reg, "gpu-a")
	if _, ok := n.(engine.RunGPUsReporter).RunGPUs(7); ok {
		t.Fatal("GPUs of a job the agent did not report")
	}
	if err := n.Start(context.Background(), job.Spec{JobID: 7, Run: 1, Command: []string{"sleep", "5"}, GPUs: []int{1}}); err != nil {
		t.Fatal(err)
	}
	hub.owner("gpu-a").ws.Close()
	waitUntil(t, "the machine to join again", func() bool {
		h := reg.history()
		return len(h) >= 3 && h[2] == "add gpu-a [job 7 run 1]"
	})
	gpus, ok := reg.node("gpu-a").(engine.RunGPUsReporter).RunGPUs(7)
	if !ok || !reflect.DeepEqual(gpus, []int{1}) {
		t.Errorf("GPUs of job 7 after the reconnect = %v, %v; want [1]", gpus, ok)
	}
	if err := reg.node("gpu-a").Stop(context.Background(), job.RunRef{Job: 7, Run: 1}); err != nil {
		t.Fatal(err)
	}
	nextExit(t, reg)
}

func TestHubRefusesRunsOnGPUsTheMachineLacks(t *testing.T) {
	h := helloFor("n1")
	h.Nodes[0].Running = []job.RunRef{{Job: 7, Run: 1}}
	h.Nodes[0].RunningGPUs = []wire.JobGPUs{{JobID: 7, Run: 1, GPUs: []int{3}}}
	_, srv, reg := startHub(t, false)
	_, _, err := rawAgent(t, srv, h)
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "GPU 3") {
		t.Errorf("answer: %v; want a close naming GPU 3", err)
	}
	if h := reg.history(); len(h) != 0 {
		t.Errorf("registry changed: %v", h)
	}
}
