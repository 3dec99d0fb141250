package wire

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/gpuportal/gpuportal/core/lanes"
	"github.com/gpuportal/gpuportal/core/memest"
)

func TestLanesRoundTrip(t *testing.T) {
	views := []lanes.GPUView{
		{Index: 0, CapacityMiB: 16384, UsedMiB: 1100 + 1200 + 4255, PersistentMiB: 2300, Lanes: []lanes.LaneView{
			{ID: 1, SizeMiB: 4255, Running: 8, Jobs: []lanes.JobView{
				{ID: 7, Memory: memest.Estimate{PersistentMiB: 1100, EphemeralMiB: 4255, Source: memest.Declared}, Iterations: 12},
				{ID: 8, Memory: memest.Estimate{PersistentMiB: 1200, EphemeralMiB: 3000, Source: memest.Measured},
					MaxPeakMiB: 2800, Iterations: 30, Running: true},
			}},
		}},
		{Index: 1, CapacityMiB: 16384},
	}
	b, err := json.Marshal(Heartbeat{Nodes: []NodeSamples{{Node: "n1", Lanes: FromLanes(views)}}})
	if err != nil {
		t.Fatal(err)
	}
	var hb Heartbeat
	if err := json.Unmarshal(b, &hb); err != nil {
		t.Fatal(err)
	}
	got := Lanes(hb.Nodes[0].Lanes)
	if !reflect.DeepEqual(got, views) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, views)
	}
	if FromLanes(nil) != nil || Lanes(nil) != nil {
		t.Fatal("no gate: no lanes")
	}
}
