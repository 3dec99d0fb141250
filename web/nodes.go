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
	State       string    `json:"state"` // ready, draining or drained
	ConnectedAt time.Time `json:"connected_at"`
	CPUs        int       `json:"cpus"`
	MemMiB      int64     `json:"mem_mib"`
	GPUs        []GPUJSON `json:"gpus"`
	Jobs        []int64   `json:"jobs"`
}

// GPUJSON is one GPU of a machine.
type GPUJSON struct {
	Index  int    `json:"index"`
	UUID   string `json:"uuid"`
	Model  string `json:"model"`
	MemMiB int64  `json:"mem_mib"`
}

func nodeJSON(st engine.NodeStatus) NodeJSON {
	n := NodeJSON{Name: st.Name, State: "ready", ConnectedAt: st.ConnectedAt, CPUs: st.CPUs, MemMiB: st.MemMiB,
		GPUs: []GPUJSON{}, Jobs: st.Jobs}
	if n.Jobs == nil {
		n.Jobs = []int64{}
	}
	if st.Draining {
		n.State = "draining"
		if len(st.Jobs) == 0 {
			n.State = "drained"
		}
	}
	for _, d := range st.Devices {
		n.GPUs = append(n.GPUs, GPUJSON{Index: d.Index, UUID: d.UUID, Model: d.Model, MemMiB: d.MemMiB})
	}
	return n
}

func (s *Server) apiNodes(c echo.Context) error {
	out := []NodeJSON{}
	for _, st := range s.cfg.Engine.NodeStatuses() {
		out = append(out, nodeJSON(st))
	}
	return c.JSON(http.StatusOK, out)
}

// setDraining drains (on) or resumes (off) the node named by :name, for
// an admin, and records it in the audit log.
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
	}
	return s.audit(c, action, name, "")
}

func (s *Server) apiDrain(c echo.Context) error {
	if err := s.setDraining(c, c.Request().Method == http.MethodPost && c.Path() == "/api/v1/nodes/:name/drain"); err != nil {
		return err
	}
	for _, st := range s.cfg.Engine.NodeStatuses() {
		if st.Name == c.Param("name") {
			return c.JSON(http.StatusOK, nodeJSON(st))
		}
	}
	return echo.NewHTTPError(http.StatusNotFound, "node disconnected")
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
