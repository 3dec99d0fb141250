package integration

import (
	"cmp"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/internal/testprocs"
)

// A job's processes end with it (issue 29, finding 4): under agent
// --run-as owner, a job's children that leave its session and process
// group (setsid, a double fork, setpgid, a daemon, a daemon with a cleared
// environment) were still running 31 minutes after it succeeded, since
// the agent moved what was left in the job's cgroup to the root cgroup.
// Each escaping child writes its PID; once the job has ended, those PIDs
// are gone.

// escapeJob submits, as api's user, a job (in image, or a command when
// image is "") that starts testprocs.Script's processes and waits, then
// returns the job and its processes as the machine sees them, checked
// running and escaped. work is the agent's --work-dir; inits finds the
// PID, on the machine, of the container's init.
func escapeJob(t *testing.T, a *api, work, image string, init func(id int64) int) (int64, []testprocs.Proc) {
	t.Helper()
	setpgid := testprocs.Perl
	if image != "" {
		setpgid = "setpgid" // the test image's
	}
	body := map[string]any{"name": "escapes", "gpus": 1,
		"command": []string{"sh", "-c", testprocs.Script(setpgid, "while [ ! -e go ]; do sleep 0.05; done")}}
	if image != "" {
		body["image"] = image
	}
	id := submit(t, a, body)
	if j := a.waitState(id, 60*time.Second, "running", "failed"); j.State != "running" {
		t.Fatalf("job %d %s: %q\n%s", id, j.State, j.Reason, jobLog(t, a, id))
	}
	dir := filepath.Join(work, "jobs", strconv.FormatInt(id, 10))
	ps := testprocs.Read(t, dir)
	eventually(t, 30*time.Second, "the job to say it started", func() bool { return strings.Contains(jobLog(t, a, id), "started") })
	testprocs.CheckLog(t, jobLog(t, a, id))
	if image != "" {
		ps = testprocs.InNamespace(t, init(id), ps)
	}
	t.Cleanup(func() { testprocs.Kill(ps) })
	for _, p := range ps {
		if !p.Alive() {
			t.Fatalf("%s (%d) is not running while its job runs", p.Name, p.PID)
		}
	}
	return id, ps
}

// endJob ends job id as end says: "succeeded" (its first process exits:
// the file it waits for appears) or "cancelled" (the API), and waits for
// the server to see it.
func endJob(t *testing.T, a *api, work string, id int64, end string) {
	t.Helper()
	switch end {
	case "succeeded":
		if err := os.WriteFile(filepath.Join(work, "jobs", strconv.FormatInt(id, 10), "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	case "cancelled":
		if st := a.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", id), nil, nil); st >= 300 {
			t.Fatalf("cancel job %d: %d", id, st)
		}
	}
	if j := a.waitState(id, 60*time.Second, end, "failed"); j.State != end {
		t.Fatalf("job %d ended %s (%q), want %s\n%s", id, j.State, j.Reason, end, jobLog(t, a, id))
	}
}

// TestJobProcessesEndWithIt: under agent --run-as owner, with cgroups
// (the machine's, here v1 with its v2 hierarchy beside) and without, a
// job's escaping processes are gone once it has succeeded or been
// cancelled; without cgroups, all but the daemon with a cleared
// environment, which nothing but a cgroup can tell from the account's
// other processes (docs/agents.md).
func TestJobProcessesEndWithIt(t *testing.T) {
	needRootAccounts(t)
	testprocs.NeedPerl(t)
	unixUser(t, "gpt-dana")
	for _, cgroups := range []bool{true, false} {
		t.Run(fmt.Sprintf("cgroups=%v", cgroups), func(t *testing.T) {
			data := t.TempDir()
			srv := startAgentServer(t, "--data", data, "--max-retries", "0")
			work := passableDir(t)
			ag := startAgent(t, srv.URL, "gpu-p1", "--run-as", "owner", "--work-dir", work, "--cgroups="+strconv.FormatBool(cgroups))
			waitGPUs(t, srv.URL, 2)
			if cgroups && !strings.Contains(ag.output(), "cgroups enforce CPU and memory allocations") {
				t.Fatalf("the agent runs as root on a machine with cgroups, yet has none:\n%s", ag.output())
			}
			dana := portalUser(t, srv.URL, data, "gpt-dana")
			for _, end := range []string{"succeeded", "cancelled"} {
				id, ps := escapeJob(t, dana, work, "", nil)
				endJob(t, dana, work, id, end)
				var gone []testprocs.Proc
				for _, p := range ps {
					if p.Name == "hidden" && !cgroups {
						continue
					}
					gone = append(gone, p)
				}
				testprocs.WaitGone(t, gone, 5*time.Second, fmt.Sprintf("job %d %s", id, end))
			}
		})
	}
}

// TestContainerJobProcessesEndWithIt: the same in a container job, with
// cgroups and without: every process is gone with the container's PID
// namespace once the job has ended.
func TestContainerJobProcessesEndWithIt(t *testing.T) {
	conf := needPodman(t)
	image := testImage(t, conf)
	unixUser(t, "gpt-dana")
	t.Setenv("CONTAINERS_CONF", conf)
	for _, cgroups := range []bool{true, false} {
		t.Run(fmt.Sprintf("cgroups=%v", cgroups), func(t *testing.T) {
			data := t.TempDir()
			srv := startAgentServer(t, "--data", data, "--max-retries", "0", "--allowed-images", "localhost/")
			work := passableDir(t)
			startAgent(t, srv.URL, "gpu-p2", "--run-as", "owner", "--work-dir", work, "--container-runtime", "podman",
				"--cgroups="+strconv.FormatBool(cgroups))
			waitGPUs(t, srv.URL, 2)
			dana := portalUser(t, srv.URL, data, "gpt-dana")
			init := func(id int64) int {
				names := containersOf(t, conf, fmt.Sprintf("gpuportal-gpu-p2-%d-", id))
				if len(names) != 1 {
					t.Fatalf("containers of job %d: %v, want one", id, names)
				}
				out, err := podmanOut(t, conf, "inspect", "--format", "{{.State.Pid}}", names[0])
				pid, perr := strconv.Atoi(strings.TrimSpace(out))
				if err != nil || perr != nil {
					t.Fatalf("the init of %s: %q, %v", names[0], out, err)
				}
				return pid
			}
			for _, end := range []string{"succeeded", "cancelled"} {
				id, ps := escapeJob(t, dana, work, image, init)
				endJob(t, dana, work, id, end)
				testprocs.WaitGone(t, ps, 5*time.Second, fmt.Sprintf("container job %d %s", id, end))
			}
		})
	}
}

// TestContainerNetwork: a container job's network and IPC are its own:
// it cannot reach a server on the machine's loopback, and its /dev/shm
// holds at least 1 GiB; with agent --container-network host it shares
// the machine's network, its IPC still its own.
func TestContainerNetwork(t *testing.T) {
	conf := needPodman(t)
	image := testImage(t, conf)
	unixUser(t, "gpt-dana")
	t.Setenv("CONTAINERS_CONF", conf)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hostSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "the machine's loopback") })}
	go func() { _ = hostSrv.Serve(l) }()
	t.Cleanup(func() { _ = hostSrv.Close() })
	hostNet, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	hostIPC, err := os.Readlink("/proc/self/ns/ipc")
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`echo "net $(readlink /proc/self/ns/net)"
echo "ipc $(readlink /proc/self/ns/ipc)"
echo "shm $(grep ' /dev/shm ' /proc/mounts)"
host=%s
printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 "${host%%:*}" "${host##*:}" | grep -q "machine's loopback" && echo "reached" || echo "unreachable"`, l.Addr())

	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--max-retries", "0", "--allowed-images", "localhost/")
	dana := portalUser(t, srv.URL, data, "gpt-dana")
	for _, tc := range []struct {
		network              string
		sameNet, reachesHost bool
	}{
		{"", false, false},
		{"host", true, true},
	} {
		t.Run("network="+tc.network, func(t *testing.T) {
			args := []string{"--run-as", "owner", "--work-dir", passableDir(t), "--container-runtime", "podman", "--cgroups=false"}
			if tc.network != "" {
				args = append(args, "--container-network", tc.network)
			}
			ag := startAgent(t, srv.URL, "gpu-n-"+cmp.Or(tc.network, "private"), args...)
			waitGPUs(t, srv.URL, 2)
			id := submit(t, dana, map[string]any{"name": "net", "gpus": 1, "image": image, "command": []string{"sh", "-c", script}})
			if j := dana.waitState(id, 60*time.Second, "succeeded", "failed"); j.State != "succeeded" {
				t.Fatalf("job %d %s: %q\n%s", id, j.State, j.Reason, jobLog(t, dana, id))
			}
			out := jobLog(t, dana, id)
			t.Logf("the container job printed:\n%s", out)
			lines := map[string]string{}
			for _, line := range strings.Split(out, "\n") {
				k, v, _ := strings.Cut(line, " ")
				lines[k] = strings.TrimSpace(v)
			}
			if (lines["net"] == hostNet) != tc.sameNet {
				t.Errorf("the container's network namespace %q, the machine's %q: want the same %v", lines["net"], hostNet, tc.sameNet)
			}
			if lines["ipc"] == "" || lines["ipc"] == hostIPC {
				t.Errorf("the container's IPC namespace %q is the machine's %q", lines["ipc"], hostIPC)
			}
			if m := shmSize.FindStringSubmatch(lines["shm"]); m == nil {
				t.Errorf("no size in the container's /dev/shm mount %q", lines["shm"])
			} else if kb, _ := strconv.Atoi(m[1]); kb < 1<<20 {
				t.Errorf("/dev/shm of %d KiB, want at least 1 GiB", kb)
			}
			if got := strings.Contains(out, "reached\n"); got != tc.reachesHost {
				t.Errorf("the container reached a server on the machine's loopback: %v, want %v", got, tc.reachesHost)
			}
			ag.stop()
			eventually(t, 30*time.Second, "the agent to go", func() bool { return connectedGPUs(t, srv.URL) == 0 })
		})
	}
}

// shmSize is the size of a tmpfs in /proc/mounts.
var shmSize = regexp.MustCompile(`size=(\d+)k`)
