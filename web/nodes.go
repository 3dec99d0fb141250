package web

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/core/engine"
)

// NodeJSON is a connected machine as the API shows it.
type NodeJSON struct {
	Name        string    `json:"name"`
	State       string    `json:"state"` // ready, cordoned, draining or drained
	ConnectedAt time.Time `json:"connected_at"`
	CPUs        int       `json:"cpus"`
	MemMiB      int64     `json:"mem_mib"`
	GPUs        []GPUJSON `json:"gpus"`
	Jobs        []int64   `json:"jobs"`
	// LiveMemoryUnavailable says why the GPUs' live memory is unknown
	// (a Slurm node without a monitor-only agent); empty when known.
	LiveMemoryUnavailable string `json:"live_memory_unavailable,omitempty"`
	// CPUAllocatedMilli and MemAllocatedMiB are what the scheduler
	// allocated to the jobs running there (docs/synergy.md).
	CPUAllocatedMilli int64 `json:"cpu_allocated_milli"`
	MemAllocatedMiB   int64 `json:"mem_allocated_mib"`
	// Note, in a follower replica's answer to an admin's action, says
	// that the leader applies it on its next pass.
	Note string `json:"note,omitempty"`
}

// GPUJSON is one GPU of a machine.
type GPUJSON struct {
	Index  int    `json:"index"`
	UUID   string `json:"uuid"`
	Model  string `json:"model"`
	MemMiB int64  `json:"mem_mib"`
	// Health is ok, or unhealthy when the GPU reported an error (Fault
	// says which) and takes no new jobs until an admin clears it.
	Health string `json:"health"`
	Fault  string `json:"fault,omitempty"`
}

func nodeJSON(st engine.NodeStatus) NodeJSON {
	n := NodeJSON{Name: st.Name, State: "ready", ConnectedAt: st.ConnectedAt, CPUs: st.CPUs, MemMiB: st.MemMiB,
		GPUs: []GPUJSON{}, Jobs: st.Jobs}
	if n.Jobs == nil {
		n.Jobs = []int64{}
	}
	switch {
	case st.Draining && len(st.Jobs) == 0:
		n.State = "drained"
	case st.Draining:
		n.State = "draining"
	case st.Cordoned:
		n.State = "cordoned"
	}
	for _, d := range st.Devices {
		n.GPUs = append(n.GPUs, GPUJSON{Index: d.Index, UUID: d.UUID, Model: d.Model, MemMiB: d.MemMiB, Health: "ok"})
	}
	return n
}

func (s *Server) apiNodes(c echo.Context) error {
	out := []NodeJSON{}
	for _, st := range s.cfg.Engine.NodeStatuses() {
		out = append(out, s.describeNode(st))
	}
	return c.JSON(http.StatusOK, out)
}

// setDraining drains (on) or resumes (off) the node named by :name, for
// an admin, and records it in the audit log. On a follower replica it
// records the change in the store, for the leader's next pass.
func (s *Server) setDraining(c echo.Context, on bool) error {
	name := c.Param("name")
	err := s.cfg.Engine.SetDraining(name, on)
	if errors.Is(err, engine.ErrUnknownNode) {
		return echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("no node %q is connected", name))
	}
	if err != nil {
		return err
	}
	action := "node.resume"
	if on {
		action = "node.drain"
	} else if err := s.cfg.Engine.SetCordoned(name, false); err != nil {
		// Resume makes the machine ready again: not cordoned either.
		return err
	}
	return s.audit(c, action, name, "")
}

func (s *Server) apiDrain(c echo.Context) error {
	on := c.Request().Method == http.MethodPost && c.Path() == "/api/v1/nodes/:name/drain"
	if err := s.setDraining(c, on); err != nil {
		return err
	}
	if on {
		return s.nodeActionResponse(c, "draining")
	}
	return s.nodeActionResponse(c, "resumed")
}

func (s *Server) drainForm(c echo.Context) error {
	if err := s.setDraining(c, c.Path() == "/cluster/nodes/:name/drain"); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/cluster")
}

// Limits on how much of a job's output one request returns.
const (
	defaultLogTail = 64 << 10
	maxLogTail     = 10 << 20
)

// jobLogFile opens the output of the job named by :id on the machines
// that ran it.
func (s *Server) jobLogFile(c echo.Context) (*os.File, int64, error) {
	j, err := s.loadJob(c)
	if err != nil {
		return nil, 0, err
	}
	f, err := s.openJobLog(j.ID)
	if errors.Is(err, os.ErrNotExist) {
		return nil, j.ID, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("job %d has no output on a connected machine", j.ID))
	}
	return f, j.ID, err
}

// openJobLog opens a job's output file, kept by the machine that ran it
// (or, for remote machines, the server's copy). It returns an error
// wrapping os.ErrNotExist when no connected machine has it.
func (s *Server) openJobLog(id int64) (*os.File, error) {
	for _, n := range s.cfg.Engine.Nodes() {
		lp, ok := n.(interface{ LogPath(int64) string })
		if !ok {
			continue
		}
		f, err := os.Open(lp.LogPath(id))
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open output of job %d: %w", id, err)
		}
	}
	return nil, fmt.Errorf("output of job %d: %w", id, os.ErrNotExist)
}

// apiJobLogs returns the end of a job's output as text (?tail_bytes=N,
// default 64 KiB), or the whole file as a download (?download=1).
func (s *Server) apiJobLogs(c echo.Context) error {
	tail := int64(defaultLogTail)
	if v := c.QueryParam("tail_bytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > maxLogTail {
			return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("tail_bytes: must be a number from 1 to %d", maxLogTail))
		}
		tail = n
	}
	f, id, err := s.jobLogFile(c)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if c.QueryParam("download") == "1" {
		c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf("attachment; filename=job-%d.log", id))
		return c.Stream(http.StatusOK, "text/plain; charset=utf-8", f)
	}
	if _, err := f.Seek(max(0, st.Size()-tail), io.SeekStart); err != nil {
		return err
	}
	return c.Stream(http.StatusOK, "text/plain; charset=utf-8", f)
}
