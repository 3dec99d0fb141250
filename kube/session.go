package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport/spdy"

	"github.com/gpuportal/gpuportal/core/job"
)

// Interactive sessions on Kubernetes (docs/kubernetes.md, "Sessions"): a
// session's pod serves on a port of its own network namespace
// (SessionPort, or the web app's own), which is never exposed: no
// Service, no host port. The portal's proxy reaches it through the API
// server's pods/portforward subresource, which the API server passes to
// the node's kubelet, as `kubectl port-forward` does: from inside the
// cluster or outside it, without a route to the pods' network.

// SessionPort is the port Jupyter, and a web app that names none, listen
// on in a session's pod ($PORT).
const SessionPort = 8888

// AnnotationSessionPort is the port a session's pod serves on.
const AnnotationSessionPort = "gpuportal.io/session-port"

// sessionPod is what session s adds to its pod: the container's command
// (nil: the job's own), the variables it gets, and the port it serves on.
// A terminal session is refused: its shell is served by gpuportal's
// agent, which a Kubernetes node does not run.
func sessionPod(s job.Spec) (command []string, env []string, port int, err error) {
	ss := s.Session
	if err := ss.Check(); err != nil {
		return nil, nil, 0, err
	}
	port = SessionPort
	if ss.Type == job.SessionWeb && ss.Port != 0 {
		port = ss.Port
	}
	env = []string{"PORT=" + strconv.Itoa(port), "GPUPORTAL_BASE_URL=" + ss.BaseURL, "GPUPORTAL_SESSION_TOKEN=" + ss.Token}
	switch ss.Type {
	case job.SessionJupyter:
		command = append([]string(nil), s.Command...)
		if len(command) == 0 {
			command = []string{"jupyter-lab"}
		}
		// As on agents (core/agent/session.go), but on the pod's own
		// interfaces: the port is reachable only through the API server.
		command = append(command, "--no-browser", "--ip=0.0.0.0", "--port="+strconv.Itoa(port), "--port-retries=0")
		for _, app := range []string{"NotebookApp", "ServerApp"} {
			command = append(command, "--"+app+".base_url="+ss.BaseURL, "--"+app+".password=",
				"--"+app+".allow_remote_access=True", "--"+app+".trust_xheaders=True")
		}
		if s.Dir != "" {
			command = append(command, "--ServerApp.root_dir="+s.Dir, "--NotebookApp.notebook_dir="+s.Dir)
		}
		env = append(env, "JUPYTER_TOKEN="+ss.Token)
	case job.SessionTerminal:
		return nil, nil, 0, errors.New("terminal sessions do not run on Kubernetes (their shell is served by a gpuportal agent): use a jupyter or web session")
	default: // job.SessionWeb
		if len(s.Command) == 0 {
			return nil, nil, 0, errors.New("web session without a command")
		}
	}
	return command, env, port, nil
}

// dialSession connects to the server of run ref's session on node,
// through the API server (Config.DialPod).
func (e *Executor) dialSession(ctx context.Context, nodeName string, ref job.RunRef) (net.Conn, error) {
	if e.cfg.DialPod == nil {
		return nil, fmt.Errorf("dial %s on %s: sessions are not reached on this cluster", ref, nodeName)
	}
	e.mu.Lock()
	var pod string
	port := 0
	for _, r := range e.runs {
		if r.jobID != ref.Job || r.run != ref.Run || r.node != nodeName || r.stopping {
			continue
		}
		if p := e.pods[r.pod]; p != nil && p.UID == r.uid && p.Status.Phase == corev1.PodRunning {
			pod = r.pod
			port, _ = strconv.Atoi(p.Annotations[AnnotationSessionPort])
		}
	}
	e.mu.Unlock()
	if pod == "" || port <= 0 {
		return nil, fmt.Errorf("dial %s on %s: no session's pod running there", ref, nodeName)
	}
	c, err := e.cfg.DialPod(ctx, pod, port)
	if err != nil {
		return nil, fmt.Errorf("dial %s on %s: %w", ref, nodeName, err)
	}
	return c, nil
}

// DialSession implements the portal's session dialer (app.DialSession):
// a connection to run ref's session server in its pod.
func (n *node) DialSession(ctx context.Context, ref job.RunRef) (net.Conn, error) {
	return n.e.dialSession(ctx, n.name, ref)
}

// podDialer connects to a port of a pod of namespace through the API
// server's pods/portforward (SPDY, as kubectl port-forward), one
// forwarding connection per connection made: c, a client of the API
// server cfg reaches, names the URL.
func podDialer(cfg *rest.Config, c *Client, namespace string) (func(ctx context.Context, pod string, port int) (net.Conn, error), error) {
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward client: %w", err)
	}
	return func(ctx context.Context, pod string, port int) (net.Conn, error) {
		u := c.Pods(namespace).req(c.rc.Post()).Name(pod).SubResource("portforward").URL()
		d := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
		type dialed struct {
			c   net.Conn
			err error
		}
		ch := make(chan dialed, 1)
		go func() {
			c, err := forward(d, port)
			ch <- dialed{c, err}
		}()
		select {
		case r := <-ch:
			return r.c, r.err
		case <-ctx.Done():
			go func() {
				if r := <-ch; r.c != nil {
					r.c.Close()
				}
			}()
			return nil, ctx.Err()
		}
	}, nil
}

// portForwardProtocol is the port-forwarding protocol kubectl speaks
// over SPDY (k8s.io/client-go/tools/portforward's PortForwardProtocolV1Name).
const portForwardProtocol = "portforward.k8s.io"

// forward opens a port-forwarding connection with d and the stream
// pair (data and error) of one connection to port, as a net.Conn.
func forward(d httpstream.Dialer, port int) (net.Conn, error) {
	conn, _, err := d.Dial(portForwardProtocol)
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("port-forward to port %d: %w", port, err)
	}
	// Nothing is written to the error stream; the kubelet writes why the
	// port could not be reached.
	errStream.Close()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(h)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("port-forward to port %d: %w", port, err)
	}
	c := &streamConn{conn: conn, data: data, port: port}
	go func() {
		msg, _ := io.ReadAll(io.LimitReader(errStream, 4<<10))
		if len(msg) > 0 {
			c.fail(fmt.Errorf("port-forward to port %d: %s", port, msg))
		}
	}()
	return c, nil
}

// streamConn is one forwarded connection: reads and writes go to its
// data stream; closing it closes the port-forwarding connection.
type streamConn struct {
	conn httpstream.Connection
	data httpstream.Stream
	port int

	mu  sync.Mutex
	err error // why the kubelet ended it
}

func (c *streamConn) fail(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	c.conn.Close()
}

func (c *streamConn) Read(b []byte) (int, error) {
	n, err := c.data.Read(b)
	if err != nil {
		c.mu.Lock()
		if c.err != nil {
			err = c.err
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *streamConn) Write(b []byte) (int, error) { return c.data.Write(b) }

func (c *streamConn) Close() error {
	c.data.Close()
	return c.conn.Close()
}

// The streams have no addresses or deadlines of their own; an HTTP
// client's time limits are its own timers.
func (c *streamConn) LocalAddr() net.Addr              { return podAddr{} }
func (c *streamConn) RemoteAddr() net.Addr             { return podAddr{port: c.port} }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

type podAddr struct{ port int }

func (podAddr) Network() string  { return "portforward" }
func (a podAddr) String() string { return "pod:" + strconv.Itoa(a.port) }
