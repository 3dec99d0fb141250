package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
)

func TestParseAgentFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     string
		wantErr string
		check   func(agentFlags) bool
	}{
		{"token from the environment", []string{"--server", "http://s"}, "from-env", "", func(f agentFlags) bool { return f.token == "from-env" }},
		{"the flag wins", []string{"--server", "http://s", "--token", "flag"}, "from-env", "", func(f agentFlags) bool { return f.token == "flag" }},
		{"no token", []string{"--server", "http://s"}, "", "no token", nil},
		{"no server", []string{"--token", "t"}, "", "--server", nil},
		{"check needs no token", []string{"--server", "http://s", "--check"}, "", "", func(f agentFlags) bool { return f.check && f.token == "" }},
		{"a name that is a path", []string{"--server", "http://s", "--token", "t", "--name", "a/b"}, "", "--name", nil},
		{"stray argument", []string{"--server", "http://s", "--token", "t", "extra"}, "", "unexpected", nil},
		{"defaults", []string{"--server", "http://s", "--token", "t"}, "", "", func(f agentFlags) bool {
			return f.gpus == "nvml" && f.runAs == "" && f.workDir == "gpuportal-agent" && f.name != ""
		}},
		{"monitor-only with injected faults", []string{"--server", "http://s", "--token", "t", "--monitor-only", "--gpus", "sim:1x2x40", "--sim-fault", "1:xid79@2s"}, "", "", func(f agentFlags) bool {
			return f.monitorOnly && len(f.simFaults) == 1 && f.simFaults[0].XID == 79 && f.simFaults[0].GPU == 1
		}},
		{"a fault that does not parse", []string{"--server", "http://s", "--token", "t", "--gpus", "sim:1x2x40", "--sim-fault", "0:melt"}, "", "--sim-fault", nil},
		{"jobs as their owners, private folders by default", []string{"--server", "http://s", "--token", "t", "--run-as", "owner"}, "", "", func(f agentFlags) bool {
			return f.runAs == "owner" && f.jobDirMode == 0o700 && f.minUID == 1000 && !f.allowRootOwner
		}},
		{"a group mode for team sharing", []string{"--server", "http://s", "--token", "t", "--run-as", "owner", "--job-dir-mode", "0750"}, "", "", func(f agentFlags) bool {
			return f.jobDirMode == 0o750
		}},
		{"a job folder open to others", []string{"--server", "http://s", "--token", "t", "--job-dir-mode", "0755"}, "", "--job-dir-mode", nil},
		{"a job folder mode that is not octal", []string{"--server", "http://s", "--token", "t", "--job-dir-mode", "rwx"}, "", "--job-dir-mode", nil},
		{"a minimum user ID of 0", []string{"--server", "http://s", "--token", "t", "--min-uid", "0"}, "", "--min-uid", nil},
		{"root owners need --run-as owner", []string{"--server", "http://s", "--token", "t", "--allow-root-owner"}, "", "--run-as owner", nil},
		{"faults need simulated GPUs", []string{"--server", "http://s", "--token", "t", "--sim-fault", "0:ecc"}, "", "simulated GPUs", nil},
		{"simulated jobs that save a checkpoint", []string{"--server", "http://s", "--token", "t", "--gpus", "sim:1x2x40", "--sim-checkpoint", "3s"}, "", "", func(f agentFlags) bool {
			return f.simCheckpoint == 3*time.Second
		}},
		{"a checkpoint needs simulated GPUs", []string{"--server", "http://s", "--token", "t", "--sim-checkpoint", "3s"}, "", "--sim-checkpoint needs simulated GPUs", nil},
		{"a negative checkpoint time", []string{"--server", "http://s", "--token", "t", "--gpus", "sim:1x2x40", "--sim-checkpoint", "-1s"}, "", "--sim-checkpoint -1s: must be 0 or more", nil},
		{"containers on a network of their own by default", []string{"--server", "http://s", "--token", "t", "--container-runtime", "podman"}, "", "", func(f agentFlags) bool {
			return f.containerNetwork.String() == "private" && f.containerNetwork != agent.NetworkHost
		}},
		{"containers on the machine's network", []string{"--server", "http://s", "--token", "t", "--container-runtime", "podman", "--container-network", "host"}, "", "", func(f agentFlags) bool {
			return f.containerNetwork == agent.NetworkHost
		}},
		{"a container network that is none", []string{"--server", "http://s", "--token", "t", "--container-runtime", "podman", "--container-network", "bridge"}, "", `--container-network" flag: "bridge": want private (the default) or host`, nil},
		{"the machine's network without containers", []string{"--server", "http://s", "--token", "t", "--container-network", "host"}, "", "--container-network host needs --container-runtime", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(agentTokenEnv, tc.env)
			t.Setenv(jobServerEnv, "")
			f, err := parseAgentFlags(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(f) {
				t.Errorf("flags = %+v, %v", f, err)
			}
		})
	}
}

func TestAgentMachines(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := []struct {
		gpus      string
		wantNames []string
		wantGPUs  int
		wantErr   string
	}{
		{"sim:1x4x80", []string{"box"}, 4, ""},
		{"sim:3x2x40", []string{"box-0", "box-1", "box-2"}, 2, ""},
		{"sim:0x2x40", nil, 0, "1 to 4096"},
		{"sim:2x2", nil, 0, "NODESxGPUSxGB"},
		{"cuda", nil, 0, "nvml or sim"},
	}
	for _, tc := range tests {
		ms, closeGPUs, err := agentMachines(agentFlags{gpus: tc.gpus, name: "box", workDir: "w"}, log)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.gpus, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.gpus, err)
		}
		var names []string
		for _, m := range ms {
			names = append(names, m.name)
			if len(m.backend.Devices()) != tc.wantGPUs || m.cpus <= 0 || m.memMiB <= 0 {
				t.Errorf("%s: machine %+v", tc.gpus, m)
			}
		}
		if strings.Join(names, ",") != strings.Join(tc.wantNames, ",") {
			t.Errorf("%s: machines %v, want %v", tc.gpus, names, tc.wantNames)
		}
		_ = closeGPUs()
	}
}

func TestHostMemory(t *testing.T) {
	mem, err := hostMemMiB()
	if err != nil || mem < 64 {
		t.Errorf("host memory = %d MiB, %v", mem, err)
	}
}

// TestAgentCheck: agent --check (the agent image's HEALTHCHECK) exits 0
// when a server answers /readyz, and with an error naming each server
// otherwise; it needs no token.
func TestAgentCheck(t *testing.T) {
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "ready")
	}))
	defer ready.Close()
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "database unreachable", http.StatusServiceUnavailable)
	}))
	defer notReady.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()

	tests := []struct {
		name    string
		server  string
		wantErr []string // empty: success
	}{
		{"a ready server", ready.URL, nil},
		{"a trailing slash", ready.URL + "/", nil},
		{"the second of two replicas", notReady.URL + "," + ready.URL, nil},
		{"a server that is not ready", notReady.URL, []string{"503", "database unreachable"}},
		{"no server listening", goneURL, []string{goneURL + "/readyz"}},
		{"both fail", notReady.URL + "," + goneURL, []string{"503", goneURL}},
		{"not a URL", "gpus.example.com", []string{"--server", "http://"}},
		{"the server from the environment", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(agentTokenEnv, "")
			args := []string{"--check", "--server", tc.server}
			t.Setenv(jobServerEnv, "")
			if tc.server == "" {
				t.Setenv(jobServerEnv, ready.URL)
				args = []string{"--check"}
			}
			var out strings.Builder
			err := jobCmd{stdout: &out, stderr: io.Discard}.execute(context.Background(), append([]string{"agent"}, args...))
			if len(tc.wantErr) == 0 {
				if err != nil || !strings.Contains(out.String(), "is ready") {
					t.Fatalf("agent --check = %v, printed %q; want success", err, out.String())
				}
				return
			}
			if err == nil {
				t.Fatalf("agent --check succeeded against %s", tc.server)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("agent --check error %q does not name %q", err, w)
				}
			}
		})
	}
}
