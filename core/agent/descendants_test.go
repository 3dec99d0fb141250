package agent

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStragglers: a child that left its parent's process group (setsid,
// as Jupyter's kernels do) is found and ended; the group's own members
// are left to the group's signal.
func TestStragglers(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	cmd := exec.Command("sh", "-c", `setsid sleep 60 & echo $!; sleep 60 & wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()
	b := make([]byte, 32)
	n, _ := out.Read(b)
	stray, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil {
		t.Fatalf("the child's PID: %q", b[:n])
	}
	var got []straggler
	deadline := time.Now().Add(5 * time.Second)
	for len(got) == 0 && time.Now().Before(deadline) {
		got = stragglers(cmd.Process.Pid, cmd.Process.Pid)
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != 1 || got[0].pid != stray {
		t.Fatalf("stragglers %v, want the setsid child %d only", got, stray)
	}
	got[0].signal(syscall.SIGKILL)
	deadline = time.Now().Add(5 * time.Second)
	for {
		f := procStat(stray)
		if f == nil || f[0] == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the straggler %d still runs: %v", stray, f[:1])
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A PID whose process changed is left alone.
	(straggler{pid: cmd.Process.Pid, start: "not-its-start"}).signal(syscall.SIGKILL)
	if f := procStat(cmd.Process.Pid); f == nil || f[0] == "Z" {
		t.Error("signal ended a process whose start time differs")
	}
}
