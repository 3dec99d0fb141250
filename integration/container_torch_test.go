package integration

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The real PyTorch script in a container job (issue 18). The image
// docs/portal.md builds with examples/pytorch/build-image (mmdebstrap of
// Debian's python3-torch, 1.3 GB) takes minutes, too long for CI; this
// test runs the same examples/pytorch/train.py in a container of a tiny
// image instead, whose /usr is the host's, mounted read-only by Podman
// for every container of the agent (containers.conf's `volumes`, an
// operator's setting, docs/agents.md): the host's Debian python3 and
// python3-torch (scripts/ensure-torch) run in it, so the script, the
// account, the variables, the checkpoint in the job folder and the
// preemption are the real ones; what the image itself holds is proven by
// hand in docs/portal.md.

// hostTorchPython is Debian's python3, which must import torch.
const hostTorchPython = "/usr/bin/python3"

// needHostTorch fails under CI, and skips elsewhere, unless Debian's
// python3-torch is installed and the host's /usr is merged (/bin, /lib
// and /lib64 are links into /usr, so that mounting /usr gives the
// container every program and library).
func needHostTorch(t *testing.T) {
	t.Helper()
	err := exec.Command(hostTorchPython, "-c", "import torch").Run()
	if err == nil {
		for _, d := range []string{"bin", "lib", "lib64"} {
			if l, lerr := os.Readlink("/" + d); lerr != nil || l != "usr/"+d {
				err = fmt.Errorf("/%s is not a link to usr/%s (a /usr not merged): %v", d, d, lerr)
				break
			}
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the PyTorch container job needs Debian's python3-torch in a merged /usr (scripts/ensure-torch): %v", err)
		}
		t.Skipf("needs Debian's python3-torch (scripts/ensure-torch): %v", err)
	}
}

// hostUsrConf writes a Podman configuration that is the tests' own
// (testdata/podman/containers.conf) plus the host's /usr mounted
// read-only in every container, and returns its path.
func hostUsrConf(t *testing.T, conf string) string {
	t.Helper()
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	const section = "[containers]\n"
	if !bytes.Contains(b, []byte(section)) {
		t.Fatalf("%s has no %q section", conf, strings.TrimSpace(section))
	}
	b = bytes.Replace(b, []byte(section), []byte(section+`volumes = ["/usr:/usr:ro"]`+"\n"), 1)
	out := filepath.Join(t.TempDir(), "containers.conf")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// torchImage makes sure the image of the PyTorch test exists and returns
// its name: no program of its own, the links of a merged /usr, the
// host's dynamic linker cache and alternatives links (what finds BLAS),
// and examples/pytorch/train.py as /opt/gpuportal/train.py, as the image
// build-image makes has it. The tag hashes its files.
func torchImage(t *testing.T, conf string) string {
	t.Helper()
	script, err := os.ReadFile("../examples/pytorch/train.py")
	if err != nil {
		t.Fatal(err)
	}
	ldcache, err := os.ReadFile("/etc/ld.so.cache")
	if err != nil {
		t.Fatal(err)
	}
	alts, err := os.ReadDir("/etc/alternatives")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(h *tar.Header, body []byte) {
		h.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	dir := func(name string, mode int64) {
		add(&tar.Header{Name: name + "/", Typeflag: tar.TypeDir, Mode: mode}, nil)
	}
	file := func(name string, mode int64, body []byte) {
		add(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(body))}, body)
	}
	link := func(name, target string) {
		add(&tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}, nil)
	}
	for _, d := range []string{"usr", "etc", "etc/alternatives", "opt", "opt/gpuportal", "proc", "sys", "dev", "root"} {
		dir(d, 0o755)
	}
	dir("tmp", 0o1777)
	for _, d := range []string{"bin", "lib", "lib64", "sbin"} {
		link(d, "usr/"+d)
	}
	file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n"))
	file("etc/group", 0o644, []byte("root:x:0:\n"))
	file("etc/ld.so.cache", 0o644, ldcache)
	for _, a := range alts {
		if target, err := os.Readlink(filepath.Join("/etc/alternatives", a.Name())); err == nil {
			link("etc/alternatives/"+a.Name(), target)
		}
	}
	file("opt/gpuportal/train.py", 0o644, script)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	name := "localhost/gpuportal-test-hostusr-torch:" + hex.EncodeToString(sum[:6])
	if podman(t, conf, "image", "exists", name) == nil {
		return name
	}
	tarball := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := os.WriteFile(tarball, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := podman(t, conf, "import", "--change", `CMD ["python3", "/opt/gpuportal/train.py"]`,
		"--change", "ENV PATH=/usr/local/bin:/usr/bin:/bin", "--change", "ENV LANG=C.UTF-8", tarball, name); err != nil {
		t.Fatalf("import the PyTorch test image: %v", err)
	}
	return name
}

// TestPyTorchContainerJob: examples/pytorch/train.py runs as a container
// job of cara's, as her Unix account, with CUDA_VISIBLE_DEVICES naming
// its GPU and her LEARNING_RATE; it saves checkpoints into the job's
// folder; preempted by a newer job, it gets SIGTERM, saves, and its next
// run, in a new container, resumes from that step. Cancelled, it saves
// again and its container is gone.
func TestPyTorchContainerJob(t *testing.T) {
	conf := needPodman(t)
	needHostTorch(t)
	conf = hostUsrConf(t, conf)
	image := torchImage(t, conf)
	unixUser(t, "gpt-cara")
	t.Setenv("CONTAINERS_CONF", conf)

	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--max-retries", "0", "--allowed-images", "localhost/", "--thresholds", "3")
	work := passableDir(t)
	startAgent(t, srv.URL, "gpu-t1", "--gpus", "sim:1x1x80", "--run-as", "owner", "--work-dir", work,
		"--container-runtime", "podman", "--grace", "20s")
	waitGPUs(t, srv.URL, 1)
	cara := portalUser(t, srv.URL, data, "gpt-cara")

	// Steps enough never to end within the test, whatever the machine's
	// speed: it ends cancelled.
	id := submit(t, cara, map[string]any{"name": "torch-box", "gpus": 1, "image": image,
		"command": []string{"python3", "/opt/gpuportal/train.py"},
		"env":     map[string]string{"STEPS": "100000000", "CHECKPOINT_EVERY": "200", "LEARNING_RATE": "0.1"}})
	j := cara.waitState(id, 60*time.Second, "running", "failed")
	if j.State != "running" {
		t.Fatalf("the PyTorch container job %s: %q\n%s", j.State, j.Reason, jobLog(t, cara, id))
	}
	gpu := strings.TrimPrefix(j.Placement[0], "gpu-t1:")
	var out string
	eventually(t, 90*time.Second, "the first checkpoint of the PyTorch job", func() bool {
		out = jobLog(t, cara, id)
		return strings.Contains(out, "step 200/")
	})
	uid := unixUser(t, "gpt-cara").Uid
	banner := fmt.Sprintf(" on cpu as gpt-cara (uid %s); job %d, run 1, CUDA_VISIBLE_DEVICES=%s, LEARNING_RATE=0.1\n", uid, id, gpu)
	if !strings.Contains(out, banner) {
		t.Errorf("the PyTorch container job printed\n%s\nwant a line ending in %q", out, banner)
	}
	ckpt := filepath.Join(work, "jobs", fmt.Sprint(id), "checkpoint", "model.pt")
	if st, err := os.Stat(ckpt); err != nil {
		t.Errorf("no checkpoint in the job's folder: %v", err)
	} else if owner := fmt.Sprint(st.Sys().(*syscall.Stat_t).Uid); owner != uid {
		t.Errorf("the checkpoint is owned by uid %s, want gpt-cara's %s", owner, uid)
	}

	// Past 3 GPU-seconds (importing torch takes longer) it is in queue 1:
	// a new job preempts it.
	short := submit(t, cara, map[string]any{"name": "short", "gpus": 1, "sim": map[string]any{"duration_s": 1}})
	cara.waitState(short, 60*time.Second, "succeeded")
	eventually(t, 90*time.Second, "the PyTorch job to resume and checkpoint again", func() bool {
		out = jobLog(t, cara, id)
		_, after, ok := strings.Cut(out, "resumed from step")
		return ok && regexp.MustCompile(`step \d+/`).MatchString(after)
	})
	t.Logf("the preempted PyTorch container job printed:\n%s", out)
	saved := regexp.MustCompile(`SIGTERM: checkpoint saved at step (\d+)\n`).FindStringSubmatch(out)
	resumed := regexp.MustCompile(`resumed from step (\d+)\n`).FindStringSubmatch(out)
	switch {
	case saved == nil || resumed == nil:
		t.Errorf("no checkpoint on SIGTERM, or no resume:\n%s", out)
	case saved[1] != resumed[1]:
		t.Errorf("saved at step %s, resumed from step %s", saved[1], resumed[1])
	case !strings.Contains(out, fmt.Sprintf("job %d, run 2, CUDA_VISIBLE_DEVICES=%s", id, gpu)):
		t.Errorf("no second run after the preemption:\n%s", out)
	}
	if j := cara.job(id); j.Preemptions != 1 {
		t.Errorf("preemptions = %d, want 1", j.Preemptions)
	}

	if st := cara.do(http.MethodDelete, fmt.Sprintf("/api/v1/jobs/%d", id), nil, nil); st >= 300 {
		t.Fatalf("cancel: %d", st)
	}
	cara.waitState(id, 60*time.Second, "cancelled")
	eventually(t, 30*time.Second, "the container to be gone", func() bool {
		return len(containersOf(t, conf, fmt.Sprintf("gpuportal-gpu-t1-%d-", id))) == 0
	})
	if out := jobLog(t, cara, id); strings.Count(out, "SIGTERM: checkpoint saved at step") != 2 {
		t.Errorf("the cancelled PyTorch job did not save on SIGTERM:\n%s", out)
	}
}
