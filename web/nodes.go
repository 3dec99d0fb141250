package web

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/joboutput"
)

func (s *Server) apiNodes(c echo.Context) error {
	now := time.Now()
	return c.JSON(http.StatusOK, s.app.Nodes(s.heartbeatAges(now), now))
}

// apiNodeAction answers an admin's action on the machine named by :name.
func (s *Server) apiNodeAction(action app.NodeAction) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := noFields(c); err != nil {
			return err
		}
		if err := s.app.ActOnNode(c.Request().Context(), appActor(c), c.Param("name"), action); err != nil {
			return err
		}
		return s.nodeActionResponse(c, action.Done())
	}
}

// nodeActionForm applies an admin's action from the cluster page.
func (s *Server) nodeActionForm(action app.NodeAction) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.app.ActOnNode(c.Request().Context(), appActor(c), c.Param("name"), action); err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, "/cluster")
	}
}

// Limits on how much of a job's output one request returns.
const (
	defaultLogTail = 64 << 10
	maxLogTail     = 10 << 20
)

// jobLogFile opens the output of the job named by :id on the machine
// ?node= names (one the job ran on), else on the first of its machines
// (its rank 0 when it ran on several).
func (s *Server) jobLogFile(c echo.Context) (*os.File, int64, error) {
	j, err := s.loadJob(c)
	if err != nil {
		return nil, 0, err
	}
	machines := gpu.PlacementNodes(j.Placement)
	node := c.QueryParam("node")
	if _, err := app.ChooseMachine(j.ID, machines, node); err != nil {
		return nil, j.ID, err
	}
	f, err := s.openJobLogOn(j.ID, node, machines)
	if errors.Is(err, os.ErrNotExist) {
		if node != "" {
			return nil, j.ID, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("job %d has no output on %s yet", j.ID, node))
		}
		return nil, j.ID, echo.NewHTTPError(http.StatusNotFound, fmt.Sprintf("job %d has no output yet", j.ID))
	}
	return f, j.ID, err
}

// openJobLogOn opens job id's output on machine node, or with node ""
// on the first of machines (the job's, in placement order) that has it,
// else wherever it is (openJobLog).
func (s *Server) openJobLogOn(id int64, node string, machines []string) (*os.File, error) {
	if node != "" {
		return s.openJobLog(id, node)
	}
	if len(machines) > 0 {
		// The machines of the current or last run, never one an earlier
		// run left its output on.
		for _, m := range machines {
			f, err := s.openJobLog(id, m)
			if !errors.Is(err, os.ErrNotExist) {
				return f, err
			}
		}
	}
	return s.openJobLog(id, "")
}

// openJobLog opens a job's output file, kept by the machine that ran it
// or, for remote machines, the server's copy, which stays readable once
// the machine's agent has gone: Agents.Dir/NODE/jobs/ID/output.log; of
// machine node only unless node is "". It returns an error wrapping
// os.ErrNotExist when there is neither.
func (s *Server) openJobLog(id int64, node string) (*os.File, error) {
	for _, path := range s.app.LogPaths(id, node) {
		// Never through a link a job put in its own folder.
		f, err := joboutput.Open(path)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open output of job %d: %w", id, err)
		}
	}
	if path := s.keptJobLog(id, node); path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("open output of job %d: %w", id, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("output of job %d: %w", id, os.ErrNotExist)
}

// keptJobLog is the server's copy of job id's output from a machine that
// is not connected now (node, or any when node is ""), the newest when it
// ran on several; "" if none.
func (s *Server) keptJobLog(id int64, node string) string {
	if s.cfg.DataDir == "" {
		return ""
	}
	// Where the agents' hub keeps remote output (core/agent/hub). node is
	// one of the job's machines, whose names are plain (letters, digits,
	// '.', '-', '_').
	machine := "*"
	if node != "" {
		machine = node
	}
	paths, err := filepath.Glob(filepath.Join(s.cfg.DataDir, "agents", machine, "jobs", strconv.FormatInt(id, 10), "output.log"))
	if err != nil {
		return ""
	}
	if node == "" {
		// Where the Kubernetes executor keeps its copy of a pod's output
		// (kube/logs.go), read while no node of the cluster is in the engine.
		paths = append(paths, filepath.Join(s.cfg.DataDir, "kube", "jobs", strconv.FormatInt(id, 10), "output.log"))
	}
	newest, at := "", time.Time{}
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.ModTime().After(at) {
			newest, at = p, fi.ModTime()
		}
	}
	return newest
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
	offset := int64(-1)
	if v := c.QueryParam("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return echo.NewHTTPError(http.StatusBadRequest, "offset: must be a number of bytes, 0 or more")
		}
		offset = n
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
	// The output's size, so that a client following it (offset) sees
	// when it starts anew (a requeued job's next run): size < offset.
	c.Response().Header().Set("X-Log-Size", strconv.FormatInt(st.Size(), 10))
	if offset >= 0 {
		// From offset on, at most maxLogTail bytes: a client follows the
		// output by asking again from offset plus what it received.
		if offset >= st.Size() {
			return c.Blob(http.StatusOK, "text/plain; charset=utf-8", nil)
		}
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return err
		}
		return c.Stream(http.StatusOK, "text/plain; charset=utf-8", io.LimitReader(f, maxLogTail))
	}
	if c.QueryParam("download") == "1" {
		// A whole output may take longer than an answer may (writeTimeout).
		_ = http.NewResponseController(c.Response()).SetWriteDeadline(time.Now().Add(downloadTimeout))
		c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf("attachment; filename=job-%d.log", id))
		return c.Stream(http.StatusOK, "text/plain; charset=utf-8", f)
	}
	if _, err := f.Seek(max(0, st.Size()-tail), io.SeekStart); err != nil {
		return err
	}
	return c.Stream(http.StatusOK, "text/plain; charset=utf-8", f)
}
