package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/gpuportal/gpuportal/core/job"
)

// Interactive sessions (job.Session, docs/portal.md): a session's run is a
// server on the machine's loopback interface. Jupyter and terminals get a
// free port the agent picks; a web app listens where its owner said, or on
// $PORT. The portal reaches the port only through DialSession (in process)
// or a tunnel the agent opens to the server (client.go, wire/session.go).

// TerminalCommand is the subcommand of the agent's own binary that serves
// a terminal session: gpuportal session-terminal --listen ADDR.
const TerminalCommand = "session-terminal"

// ErrNoSession is returned when dialing a run that is not a running
// session here.
var ErrNoSession = errors.New("no such session running here")

// sessionStart is how a session's run starts: its argv, the variables it
// gets beyond a job's, and the loopback port it serves on.
type sessionStart struct {
	argv []string
	env  []string
	port int
}

// freePort returns a loopback port free at the time of asking.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// sessionCommand builds the command of session s of a job whose folder is
// dir, run as ra (nil: the agent's own user), whose server listens on
// host (sessionHost).
func sessionCommand(s job.Spec, dir string, ra *runAs, host string) (sessionStart, error) {
	ss := s.Session
	if err := ss.Check(); err != nil {
		return sessionStart{}, err
	}
	port := ss.Port
	if port == 0 || ss.Type != job.SessionWeb {
		p, err := freePort()
		if err != nil {
			return sessionStart{}, err
		}
		port = p
	}
	env := []string{"PORT=" + strconv.Itoa(port), "GPUPORTAL_BASE_URL=" + ss.BaseURL, "GPUPORTAL_SESSION_TOKEN=" + ss.Token}
	switch ss.Type {
	case job.SessionJupyter:
		prog := s.Command
		if len(prog) == 0 {
			p, err := jupyterProgram()
			if err != nil {
				return sessionStart{}, err
			}
			prog = []string{p}
		}
		argv := append([]string(nil), prog...)
		argv = append(argv, "--no-browser", "--ip="+host, "--port="+strconv.Itoa(port), "--port-retries=0")
		// The portal authenticates every request (owner or admin), serves
		// the session under its own secret prefix and presents the
		// session's token, which Jupyter reads from $JUPYTER_TOKEN (never
		// a command line, which every account on the machine sees); no
		// password. Both the classic notebook server (NotebookApp) and
		// Jupyter Server (ServerApp, JupyterLab) read their own options.
		env = append(env, "JUPYTER_TOKEN="+ss.Token)
		for _, app := range []string{"NotebookApp", "ServerApp"} {
			argv = append(argv,
				"--"+app+".base_url="+ss.BaseURL,
				"--"+app+".password=",
				"--"+app+".allow_remote_access=True",
				"--"+app+".trust_xheaders=True",
			)
		}
		// Its file browser opens on the folder the user chose for the
		// job (job.Spec.Dir), else the job's folder, as a batch job
		// starts there: ServerApp's root_dir, NotebookApp's notebook_dir.
		root := jobWorkdir(dir, s.Dir)
		argv = append(argv, "--ServerApp.root_dir="+root, "--NotebookApp.notebook_dir="+root)
		env = append(env, "JUPYTER_RUNTIME_DIR="+filepath.Join(dir, ".jupyter-runtime"))
		if ra != nil && !usableHome(ra.home) {
			env = append(env, "IPYTHONDIR="+filepath.Join(dir, ".ipython"), "JUPYTER_DATA_DIR="+filepath.Join(dir, ".jupyter-data"))
		}
		return sessionStart{argv: argv, env: env, port: port}, nil
	case job.SessionTerminal:
		exe, err := os.Executable()
		if err != nil {
			return sessionStart{}, fmt.Errorf("terminal session: the agent's binary: %w", err)
		}
		shell := "/bin/sh"
		if _, err := os.Stat("/bin/bash"); err == nil {
			shell = "/bin/bash"
		}
		argv := []string{exe, TerminalCommand, "--listen", "127.0.0.1:" + strconv.Itoa(port), "--shell", shell}
		return sessionStart{argv: argv, env: append(env, "TERM=xterm-256color"), port: port}, nil
	default: // job.SessionWeb
		if len(s.Command) == 0 {
			return sessionStart{}, errors.New("web session without a command")
		}
		return sessionStart{argv: s.Command, env: env, port: port}, nil
	}
}

// usableHome reports whether home is a folder that exists (accounts made
// for services have /nonexistent).
func usableHome(home string) bool {
	fi, err := os.Stat(home)
	return err == nil && fi.IsDir()
}

// jupyterProgram finds JupyterLab, else the classic notebook server, on
// the agent's PATH.
func jupyterProgram() (string, error) {
	for _, p := range []string{"jupyter-lab", "jupyter-notebook"} {
		if path, err := exec.LookPath(p); err == nil {
			return path, nil
		}
	}
	return "", errors.New("jupyter session: neither jupyter-lab nor jupyter-notebook is installed on this machine (Debian: apt-get install python3-notebook)")
}

// DialSession connects to the loopback port of run ref's session. The
// portal's proxy calls it for sessions on in-process machines; a remote
// agent calls it when the server asks for a tunnel.
func (a *Local) DialSession(ctx context.Context, ref job.RunRef) (net.Conn, error) {
	a.mu.Lock()
	r, ok := a.runs[ref.Job]
	a.mu.Unlock()
	if !ok || r.id != ref.Run || r.sessionPort == 0 {
		return nil, fmt.Errorf("dial %s on %s: %w", ref, a.cfg.Name, ErrNoSession)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.sessionPort)))
	if err != nil {
		return nil, fmt.Errorf("dial %s on %s: %w", ref, a.cfg.Name, err)
	}
	return c, nil
}
