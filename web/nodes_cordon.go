package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/engine"
)

// Cordon and GPU health: admins cordon a machine (no new jobs; running
// ones keep running), uncordon it, and put back in service a GPU that
// reported an error (see core/engine/health.go).

// describeNode is a machine as the API shows it: its state, the health of
// each GPU, and whether its live memory is known.
func (s *Server) describeNode(st engine.NodeStatus) api.Node {
	n := nodeJSON(st)
	for _, f := range s.cfg.Engine.GPUFaults() {
		if f.Node != st.Name {
			continue
		}
		for i := range n.GPUs {
			if n.GPUs[i].Index == f.Index {
				n.GPUs[i].Health, n.GPUs[i].Fault = "unhealthy", f.Reason
			}
		}
	}
	n.LiveMemoryUnavailable = s.liveMemoryUnavailable(st.Name)
	a := s.cfg.Engine.NodeAllocations()[st.Name]
	n.CPUAllocatedMilli, n.MemAllocatedMiB = a.CPUMilli, a.MemMiB
	return n
}

// liveMemoryUnavailable says why a machine's live GPU memory is unknown;
// empty when it is known.
func (s *Server) liveMemoryUnavailable(node string) string {
	for _, n := range s.cfg.Engine.Nodes() {
		if n.Name() == node {
			return engine.LiveMemoryUnavailable(n)
		}
	}
	return ""
}

// nodeResponse answers with the machine named by :name.
func (s *Server) nodeResponse(c echo.Context) error {
	now := time.Now()
	for _, st := range s.cfg.Engine.NodeStatuses() {
		if st.Name == c.Param("name") {
			n := s.describeNode(st)
			heard(&n, s.heartbeatAges(now), now)
			return c.JSON(http.StatusOK, n)
		}
	}
	return echo.NewHTTPError(http.StatusNotFound, "node disconnected")
}

// clearGPU puts the GPU named by :name and :index back in service
// (app.App.ClearGPU).
func (s *Server) clearGPU(c echo.Context) error {
	index, err := strconv.Atoi(c.Param("index"))
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "index: want a GPU index (0, 1, ...)")
	}
	return s.app.ClearGPU(c.Request().Context(), appActor(c), c.Param("name"), index)
}

func (s *Server) apiClearGPU(c echo.Context) error {
	if err := s.clearGPU(c); err != nil {
		return err
	}
	return s.nodeActionResponse(c, "GPU "+c.Param("index")+" cleared")
}

// nodeActionResponse answers an admin's action on the machine named by
// :name: the machine, from the leader; from a follower, which runs no
// machines, its hold as the store now has it and a note that the leader
// applies the action (done, such as "cordoned") on its next pass. A
// follower cannot tell whether the machine is connected: a hold of one
// that is not takes effect when it connects.
func (s *Server) nodeActionResponse(c echo.Context, done string) error {
	if s.leading() {
		return s.nodeResponse(c)
	}
	name := c.Param("name")
	st, err := s.cfg.Engine.StoredNodeStates(c.Request().Context())
	if err != nil {
		return err
	}
	n := api.Node{Name: name, State: "ready", GPUs: []api.GPU{}, Jobs: []int64{},
		Note: done + "; takes effect on the leader's next pass"}
	switch {
	case st.Draining[name]:
		n.State = "draining"
	case st.Cordoned[name]:
		n.State = "cordoned"
	}
	return c.JSON(http.StatusOK, n)
}

func (s *Server) clearGPUForm(c echo.Context) error {
	if err := s.clearGPU(c); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/cluster")
}

// gpuFaults maps "node/index" to the fault of each GPU out of service.
func gpuFaults(e *engine.Engine) map[string]string {
	out := make(map[string]string)
	for _, f := range e.GPUFaults() {
		out[gpuName(f.Node, f.Index)] = f.Reason
	}
	return out
}

// gpuName names a GPU of the cluster: "node/index".
func gpuName(node string, index int) string { return node + "/" + strconv.Itoa(index) }
