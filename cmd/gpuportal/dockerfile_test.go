package main

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// dockerStep is one instruction of a Dockerfile.
type dockerStep struct {
	line int
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// readDockerfile reads the instructions of a Dockerfile by stage, joining
// continued lines and leaving comments out.
func readDockerfile(t *testing.T, path string) [][]dockerStep {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages [][]dockerStep
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		step := dockerStep{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if step.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("%s:%d: %s before the first FROM", path, start, step.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], step)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// goBuildLine finds the stage's "RUN [VAR=value...] go build ..." and
// returns its environment and the arguments after "build".
func goBuildLine(t *testing.T, stage []dockerStep) (env, args []string) {
	t.Helper()
	for _, s := range stage {
		if s.cmd != "RUN" || !strings.Contains(s.args, "go build") {
			continue
		}
		if strings.ContainsAny(s.args, "&|;$`'\"<>()") {
			t.Fatalf("Dockerfile:%d: keep the go build step one plain command (no shell syntax), so that this test can run it: %s", s.line, s.args)
		}
		words := strings.Fields(s.args)
		i := 0
		for ; i < len(words) && strings.Contains(words[i], "="); i++ {
			env = append(env, words[i])
		}
		if len(words) < i+2 || words[i] != "go" || words[i+1] != "build" {
			t.Fatalf("Dockerfile:%d: want RUN [VAR=value...] go build ..., got %s", s.line, s.args)
		}
		return env, words[i+2:]
	}
	t.Fatal("Dockerfile: the build stage has no RUN ... go build")
	return nil, nil
}

// flagValue returns the value of -name or --name in args, as "-name v" or
// "-name=v", and the index of the value.
func flagValue(args []string, name string) (string, int) {
	for i, a := range args {
		for _, p := range []string{"-" + name, "--" + name} {
			if a == p && i+1 < len(args) {
				return args[i+1], i + 1
			}
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v, i
			}
		}
	}
	return "", -1
}

// goVersionAtLeast reports whether Go version have (1.26, 1.26.3) is at
// least want.
func goVersionAtLeast(have, want string) bool {
	h, w := strings.Split(have, "."), strings.Split(want, ".")
	for i := range max(len(h), len(w)) {
		hv, wv := 0, 0
		if i < len(h) {
			hv, _ = strconv.Atoi(h[i])
		}
		if i < len(w) {
			wv, _ = strconv.Atoi(w[i])
		}
		if hv != wv {
			return hv > wv
		}
	}
	return true
}

// TestDockerfile checks the Dockerfile where no Docker engine runs: it
// runs the build stage's go build with the same environment and flags
// (cgo and the nvml tag: code that only compiles there breaks here
// first), and checks the image's other promises: a Go no older than
// go.mod's, a non-root user, serve by default on the data volume.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	stages := readDockerfile(t, filepath.Join(root, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages; want a build stage and a smaller run stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	// The builder's Go is no older than go.mod asks for.
	image := strings.Fields(build[0].args)[0]
	tag, ok := strings.CutPrefix(image, "golang:")
	if !ok {
		t.Fatalf("Dockerfile:%d: build stage FROM %s; want a golang image", build[0].line, image)
	}
	imageGo, _, _ := strings.Cut(tag, "-")
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var modGo string
	for _, l := range strings.Split(string(mod), "\n") {
		if v, ok := strings.CutPrefix(l, "go "); ok {
			modGo = strings.TrimSpace(v)
		}
	}
	// golang:1.26 is the newest 1.26.x, which satisfies go 1.26.N: compare
	// language versions.
	modLang := modGo
	if parts := strings.Split(modGo, "."); len(parts) > 2 {
		modLang = strings.Join(parts[:2], ".")
	}
	if !goVersionAtLeast(imageGo, modLang) {
		t.Errorf("Dockerfile builds with Go %s; go.mod needs go %s", imageGo, modGo)
	}

	env, args := goBuildLine(t, build)
	if !slices.Contains(env, "CGO_ENABLED=1") {
		t.Errorf("Dockerfile go build runs with %v; want CGO_ENABLED=1 (NVML needs cgo)", env)
	}
	tags, _ := flagValue(args, "tags")
	if !slices.Contains(strings.Split(tags, ","), "nvml") {
		t.Errorf("Dockerfile go build has -tags %q; want nvml", tags)
	}
	if _, i := flagValue(args, "o"); i < 0 || strings.HasPrefix(args[i], "-o=") || strings.HasPrefix(args[i], "--o=") {
		t.Fatalf("Dockerfile go build: want -o PATH (as separate words), got %v", args)
	} else {
		args = slices.Clone(args)
		args[i] = filepath.Join(t.TempDir(), "gpuportal")
	}
	out, _ := flagValue(args, "o")

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"build"}, args...)...)
	cmd.Dir = root // WORKDIR /src holds the repository (COPY . .)
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build step fails here: %s go build %s: %v\n%s",
			strings.Join(env, " "), strings.Join(args, " "), err, msg)
	}
	t.Logf("go build as in the Dockerfile: %s", time.Since(start).Round(time.Millisecond))
	// The binary holds NVML: it was built with cgo and the tag (nvml.go's
	// build constraint), not silently without.
	info, err := buildinfo.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "1" || !slices.Contains(strings.Split(settings["-tags"], ","), "nvml") {
		t.Errorf("built binary has CGO_ENABLED=%q -tags=%q; want 1 and nvml", settings["CGO_ENABLED"], settings["-tags"])
	}

	// The run stage: not root, serve by default, data on the volume.
	var user, volume, expose string
	var entrypoint, command []string
	for _, s := range final {
		switch s.cmd {
		case "USER":
			user = s.args
		case "VOLUME":
			volume = s.args
		case "EXPOSE":
			expose = s.args
		case "ENTRYPOINT", "CMD":
			var words []string
			if err := json.Unmarshal([]byte(s.args), &words); err != nil {
				t.Errorf("Dockerfile:%d: %s %s: use the JSON form (no shell in between signals and gpuportal)", s.line, s.cmd, s.args)
			}
			if s.cmd == "CMD" {
				command = words
			} else {
				entrypoint = words
			}
		}
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "root" || name == "0" {
		t.Errorf("Dockerfile runs as user %q; want a user other than root", user)
	}
	argv := append(slices.Clone(entrypoint), command...)
	if len(argv) < 2 || argv[0] != "gpuportal" || argv[1] != "serve" {
		t.Errorf("Dockerfile runs %q by default; want gpuportal serve", argv)
	}
	if data, _ := flagValue(argv, "data"); volume == "" || data != volume {
		t.Errorf("Dockerfile: VOLUME %q, serve --data %q; want the data folder on the volume", volume, data)
	}
	if addr, _ := flagValue(argv, "addr"); !strings.HasSuffix(addr, ":"+expose) || strings.HasPrefix(addr, "127.") {
		t.Errorf("Dockerfile: serve --addr %q, EXPOSE %q; want it to listen on the exposed port on every interface", addr, expose)
	}
}
