package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/core/engine"
)

// Cordon and GPU health: admins cordon a machine (no new jobs; running
// ones keep running), uncordon it, and put back in service a GPU that
// reported an error (see core/engine/health.go).

// describeNode is a machine as the API shows it: its state, the health of
// each GPU, and whether its live memory is known.
func (s *Server) describeNode(st engine.NodeStatus) NodeJSON {
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
	for _, st := range s.cfg.Engine.NodeStatuses() {
		if st.Name == c.Param("name") {
			return c.JSON(http.StatusOK, s.describeNode(st))
		}
	}
	return echo.NewHTTPError(http.StatusNotFound, "node disconnected")
}

// setCordoned cordons (on) or uncordons (off) the node named by :name, for
// an admin, and records it in the audit log. Uncordon makes the machine
// ready again: it ends a drain too.
func (s *Server) setCordoned(c echo.Context, on bool) error {
	name := c.Param("name")
	if !s.leading() {
		return echo.NewHTTPError(http.StatusServiceUnavailable, followerNodes)
	}
	err := s.cfg.Engine.SetCordoned(name, on)
	if errors.Is(err, engine.ErrUnknownNode) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no node %q is connected", name))
	}
	if err != nil {
		return err
	}
	action := "node.cordon"
	if !on {
		action = "node.uncordon"
		if err := s.cfg.Engine.SetDraining(name, false); err != nil {
			return err
		}
	}
	return s.audit(c, action, name, "")
}

func (s *Server) apiCordon(c echo.Context) error {
	if err := s.setCordoned(c, c.Path() == "/api/v1/nodes/:name/cordon"); err != nil {
		return err
	}
	return s.nodeResponse(c)
}

func (s *Server) cordonForm(c echo.Context) error {
	if err := s.setCordoned(c, c.Path() == "/cluster/nodes/:name/cordon"); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/cluster")
}

// clearGPU puts the GPU named by :name and :index back in service, for an
// admin, and records it in the audit log.
func (s *Server) clearGPU(c echo.Context) error {
	name := c.Param("name")
	index, err := strconv.Atoi(c.Param("index"))
	if err != nil || index < 0 {
		return echo.NewHTTPError(http.StatusBadRequest, "index: want a GPU index (0, 1, ...)")
	}
	if !s.leading() {
		// The GPUs out of service are the leader's (kept in the store,
		// loaded when it starts scheduling).
		return echo.NewHTTPError(http.StatusServiceUnavailable, followerNodes)
	}
	var reason string
	for _, f := range s.cfg.Engine.GPUFaults() {
		if f.Node == name && f.Index == index {
			reason = f.Reason
		}
	}
	if err := s.cfg.Engine.ClearGPUFault(name, index); errors.Is(err, engine.ErrGPUHealthy) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("GPU %s/%d is not out of service", name, index))
	} else if err != nil {
		return err
	}
	return s.audit(c, "gpu.clear", fmt.Sprintf("%s/%d", name, index), reason)
}

func (s *Server) apiClearGPU(c echo.Context) error {
	if err := s.clearGPU(c); err != nil {
		return err
	}
	return s.nodeResponse(c)
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
