package main

import (
	"bufio"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
)

// dockerStep is one instruction of a Dockerfile.
type dockerStep struct {
	line int
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// dockerfile is a Dockerfile's instructions: the ARGs before the first
// FROM, and the stages, each from its FROM.
type dockerfile struct {
	globalArgs []dockerStep
	stages     [][]dockerStep
}

// readDockerfile reads the instructions of a Dockerfile by stage, joining
// continued lines and leaving comments out. It fails on a parser
// directive "# syntax=", which makes BuildKit fetch a frontend image from
// a registry.
func readDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var df dockerfile
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if c, ok := strings.CutPrefix(line, "#"); ok {
			if k, _, ok := strings.Cut(c, "="); ok && strings.EqualFold(strings.TrimSpace(k), "syntax") {
				t.Errorf("%s:%d: %s: a BuildKit frontend comes from a registry; build with the engine's own parser", path, n, line)
			}
			continue
		}
		if line == "" && cur.Len() == 0 {
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
		switch {
		case step.cmd == "FROM":
			df.stages = append(df.stages, nil)
		case len(df.stages) == 0 && step.cmd == "ARG":
			df.globalArgs = append(df.globalArgs, step)
			continue
		case len(df.stages) == 0:
			t.Fatalf("%s:%d: %s before the first FROM", path, start, step.cmd)
		}
		df.stages[len(df.stages)-1] = append(df.stages[len(df.stages)-1], step)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return df
}

// stage returns the stage named by FROM ... AS name.
func (df dockerfile) stage(t *testing.T, name string) []dockerStep {
	t.Helper()
	for _, st := range df.stages {
		f := strings.Fields(st[0].args)
		if len(f) == 3 && strings.EqualFold(f[1], "AS") && f[2] == name {
			return st
		}
	}
	t.Fatalf("Dockerfile has no stage %q", name)
	return nil
}

// argDefaults returns the default values of the ARGs of steps.
func argDefaults(steps []dockerStep) map[string]string {
	m := map[string]string{}
	for _, s := range steps {
		if s.cmd == "ARG" {
			k, v, _ := strings.Cut(s.args, "=")
			m[k] = v
		}
	}
	return m
}

// shellWords splits a line into words as a shell does for words, "double
// quotes" and ${NAME} or $NAME (from vars; unset is empty), and fails on
// anything else a shell would treat specially.
func shellWords(line string, vars map[string]string) ([]string, error) {
	if i := strings.IndexAny(line, "&|;`'<>()\\"); i >= 0 {
		return nil, fmt.Errorf("%q at %d: keep it words, double quotes and ${ARG}s", line[i], i)
	}
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"':
			quoted, inWord = !quoted, true
		case c == '$':
			rest := line[i+1:]
			var name string
			if r, ok := strings.CutPrefix(rest, "{"); ok {
				end := strings.IndexByte(r, '}')
				if end < 0 {
					return nil, fmt.Errorf("unclosed ${ at %d", i)
				}
				name, i = r[:end], i+2+end
			} else {
				end := strings.IndexFunc(rest, func(r rune) bool { return r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) })
				if end < 0 {
					end = len(rest)
				}
				name, i = rest[:end], i+end
			}
			if name == "" {
				return nil, fmt.Errorf("a $ with no name at %d", i)
			}
			w.WriteString(vars[name])
			inWord = true
		case (c == ' ' || c == '\t') && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		return nil, errors.New("unclosed double quote")
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// goBuildLine finds the stage's "RUN [VAR=value...] go build ..." and
// returns its environment and the arguments after "build", with ${ARG}s
// replaced from vars.
func goBuildLine(t *testing.T, stage []dockerStep, vars map[string]string) (env, args []string, raw string) {
	t.Helper()
	for _, s := range stage {
		if s.cmd != "RUN" || !strings.Contains(s.args, "go build") {
			continue
		}
		words, err := shellWords(s.args, vars)
		if err != nil {
			t.Fatalf("Dockerfile:%d: keep the go build step one plain command, so that this test can run it: %v", s.line, err)
		}
		i := 0
		for ; i < len(words) && strings.Contains(words[i], "="); i++ {
			env = append(env, words[i])
		}
		if len(words) < i+2 || words[i] != "go" || words[i+1] != "build" {
			t.Fatalf("Dockerfile:%d: want RUN [VAR=value...] go build ..., got %s", s.line, s.args)
		}
		return env, words[i+2:], s.args
	}
	t.Fatal("Dockerfile: the build stage has no RUN ... go build")
	return nil, nil, ""
}

// labels reads the stage's LABEL key="value" pairs, ${ARG}s unreplaced.
func labels(t *testing.T, stage []dockerStep) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, s := range stage {
		if s.cmd != "LABEL" {
			continue
		}
		words, err := shellWords(strings.ReplaceAll(s.args, "$", "\x00"), nil)
		if err != nil {
			t.Fatalf("Dockerfile:%d: LABEL %s: %v", s.line, s.args, err)
		}
		for _, w := range words {
			k, v, ok := strings.Cut(w, "=")
			if !ok {
				t.Fatalf("Dockerfile:%d: LABEL %s: want key=value pairs", s.line, s.args)
			}
			m[k] = strings.ReplaceAll(v, "\x00", "$")
		}
	}
	return m
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

// Stamps the test builds with, standing in for --build-arg.
const (
	dockerTestVersion  = "v9.8.7-dockerfile-test"
	dockerTestRevision = "0123456789abcdef0123456789abcdef01234567"
)

// TestDockerfile checks the Dockerfile where no container engine runs:
// one base image for every stage (no golang image, no BuildKit frontend
// from a registry), a Go toolchain from Debian and the Go proxy no older
// than go.mod's; it runs the build stage's go build with the same
// environment, flags and build arguments (cgo and the nvml tag: code that
// only compiles there breaks here first) and checks the version stamp in
// the binary; then each image's promises: OCI labels, a HEALTHCHECK that
// the built binary passes against a ready server and fails against one
// that is not, the server as a non-root user serving the data volume, and
// the agent as root with podman.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	df := readDockerfile(t, filepath.Join(root, "Dockerfile"))
	global := argDefaults(df.globalArgs)
	build, agentStage, server := df.stage(t, "build"), df.stage(t, "agent"), df.stage(t, "server")
	if last := df.stages[len(df.stages)-1]; last[0].line != server[0].line {
		t.Errorf("Dockerfile: the last stage (the default target) is at line %d; want the server", last[0].line)
	}

	// One base image, from a build argument (a site mirrors it and names
	// its copy), and a Debian one: Go comes from Debian and the Go proxy.
	base := global["BASE"]
	if !strings.HasPrefix(base, "debian:") {
		t.Errorf("Dockerfile: ARG BASE=%q; want a debian: image", base)
	}
	for _, st := range df.stages {
		if image := strings.Fields(st[0].args)[0]; image != "${BASE}" {
			t.Errorf("Dockerfile:%d: FROM %s; want FROM ${BASE} (one base image to mirror)", st[0].line, image)
		}
	}
	buildArgs := argDefaults(build)
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
	toolchain, ok := strings.CutPrefix(buildArgs["GOTOOLCHAIN"], "go")
	if !ok || !goVersionAtLeast(toolchain, modGo) {
		t.Errorf("Dockerfile builds with GOTOOLCHAIN=%q; want go%s or newer, as go.mod asks", buildArgs["GOTOOLCHAIN"], modGo)
	}
	if !stageRuns(build, "apt-get install", "golang-go", "gcc") {
		t.Error("Dockerfile: the build stage does not install golang-go and gcc (cgo) from Debian")
	}

	vars := map[string]string{"VERSION": dockerTestVersion, "REVISION": dockerTestRevision}
	env, args, raw := goBuildLine(t, build, vars)
	if !slices.Contains(env, "CGO_ENABLED=1") {
		t.Errorf("Dockerfile go build runs with %v; want CGO_ENABLED=1 (NVML needs cgo)", env)
	}
	tags, _ := flagValue(args, "tags")
	if !slices.Contains(strings.Split(tags, ","), "nvml") {
		t.Errorf("Dockerfile go build has -tags %q; want nvml", tags)
	}
	for _, stamp := range []string{"buildinfo.version=${VERSION}", "buildinfo.revision=${REVISION}"} {
		if !strings.Contains(raw, "-X github.com/gpuportal/gpuportal/core/"+stamp) {
			t.Errorf("Dockerfile go build does not stamp -X github.com/gpuportal/gpuportal/core/%s: %s", stamp, raw)
		}
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
	// The stamp: what --version (and so /api/v1/version) says.
	if msg, err := exec.CommandContext(ctx, out, "--version").CombinedOutput(); err != nil ||
		!strings.Contains(string(msg), dockerTestVersion) || !strings.Contains(string(msg), dockerTestRevision[:12]) {
		t.Errorf("built binary --version = %q, %v; want version %s and commit %s", msg, err, dockerTestVersion, dockerTestRevision[:12])
	}

	// Both images: OCI labels from the build arguments, declared in the
	// stage (a global ARG is empty inside a stage that does not repeat it).
	for _, img := range []struct {
		name  string
		stage []dockerStep
	}{{"gpuportal-server", server}, {"gpuportal-agent", agentStage}} {
		l := labels(t, img.stage)
		stageArgs := argDefaults(img.stage)
		want := map[string]string{
			"org.opencontainers.image.title":    img.name,
			"org.opencontainers.image.source":   "https://github.com/gpuportal/gpuportal",
			"org.opencontainers.image.version":  "${VERSION}",
			"org.opencontainers.image.revision": "${REVISION}",
			"org.opencontainers.image.created":  "${CREATED}",
		}
		for k, v := range want {
			if l[k] != v {
				t.Errorf("Dockerfile stage %s: LABEL %s=%q; want %q", img.name, k, l[k], v)
			}
			if arg, ok := strings.CutPrefix(v, "${"); ok {
				if _, declared := stageArgs[strings.TrimSuffix(arg, "}")]; !declared {
					t.Errorf("Dockerfile stage %s: label %s uses %s, which the stage does not declare (ARG)", img.name, k, v)
				}
			}
		}
	}

	// The HEALTHCHECKs run the image's own binary: passes against a ready
	// server, fails against one that is not.
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "ready")
	}))
	defer ready.Close()
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	defer notReady.Close()
	checkHealth := func(name string, stage []dockerStep, wantServer string) {
		argv := healthcheck(t, stage)
		if len(argv) < 3 || argv[0] != "gpuportal" || argv[1] != "agent" || argv[2] != "--check" {
			t.Errorf("Dockerfile stage %s: HEALTHCHECK %q; want gpuportal agent --check ...", name, argv)
			return
		}
		srv, i := flagValue(argv, "server")
		if srv != wantServer {
			t.Errorf("Dockerfile stage %s: HEALTHCHECK asks --server %q; want %q", name, srv, wantServer)
		}
		for _, tc := range []struct {
			url    string
			wantOK bool
		}{{ready.URL, true}, {notReady.URL, false}} {
			run := slices.Clone(argv[1:])
			cmd := exec.CommandContext(ctx, out)
			cmd.Env = append(os.Environ(), "GPUPORTAL_SERVER=", "GPUPORTAL_AGENT_TOKEN=")
			if i >= 0 {
				run[i-1] = tc.url
			} else {
				cmd.Env = append(cmd.Env, "GPUPORTAL_SERVER="+tc.url)
			}
			cmd.Args = append([]string{out}, run...)
			msg, err := cmd.CombinedOutput()
			if (err == nil) != tc.wantOK {
				t.Errorf("Dockerfile stage %s: HEALTHCHECK against a server that is ready=%v: err = %v\n%s", name, tc.wantOK, err, msg)
			}
		}
	}

	// The server: not root, serve by default, data on the volume, healthy
	// when it answers its own /readyz.
	user, volume, expose, argv := runStage(t, server)
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "root" || name == "0" {
		t.Errorf("Dockerfile server runs as user %q; want a user other than root", user)
	}
	if len(argv) < 2 || argv[0] != "gpuportal" || argv[1] != "serve" {
		t.Errorf("Dockerfile server runs %q by default; want gpuportal serve", argv)
	}
	if data, _ := flagValue(argv, "data"); volume == "" || data != volume {
		t.Errorf("Dockerfile: VOLUME %q, serve --data %q; want the data folder on the volume", volume, data)
	}
	if addr, _ := flagValue(argv, "addr"); !strings.HasSuffix(addr, ":"+expose) || strings.HasPrefix(addr, "127.") {
		t.Errorf("Dockerfile: serve --addr %q, EXPOSE %q; want it to listen on the exposed port on every interface", addr, expose)
	}
	checkHealth("server", server, "http://127.0.0.1:"+expose)

	// The agent: root (it runs each job as its owner), podman for
	// container jobs, jobs as their owners, healthy when a server at
	// $GPUPORTAL_SERVER answers.
	user, volume, _, argv = runStage(t, agentStage)
	if user != "root" {
		t.Errorf("Dockerfile agent runs as user %q; want root, said explicitly (it switches to each job's owner)", user)
	}
	if len(argv) < 2 || argv[0] != "gpuportal" || argv[1] != "agent" {
		t.Errorf("Dockerfile agent runs %q by default; want gpuportal agent", argv)
	}
	if runAs, _ := flagValue(argv, "run-as"); runAs != "owner" {
		t.Errorf("Dockerfile agent runs jobs --run-as %q; want owner (jobs never run as root)", runAs)
	}
	if work, _ := flagValue(argv, "work-dir"); volume == "" || work != volume {
		t.Errorf("Dockerfile: agent VOLUME %q, --work-dir %q; want jobs' folders on the volume", volume, work)
	}
	if !stageRuns(agentStage, "apt-get install", "podman") {
		t.Error("Dockerfile: the agent stage does not install podman (container jobs)")
	}
	// Container jobs' srun: built static, beside the agent's binary.
	if !stageRuns(build, "CGO_ENABLED=0", "go build", "-o /out/gpuportal-srun", "./cmd/gpuportal-srun") {
		t.Error("Dockerfile: the build stage does not build gpuportal-srun without cgo (CGO_ENABLED=0 go build -o /out/gpuportal-srun ./cmd/gpuportal-srun)")
	}
	if !slices.ContainsFunc(agentStage, func(s dockerStep) bool {
		return s.cmd == "COPY" && s.args == "--from=build /out/gpuportal-srun /usr/local/bin/gpuportal-srun"
	}) {
		t.Error("Dockerfile: the agent stage does not put gpuportal-srun beside gpuportal (COPY --from=build /out/gpuportal-srun /usr/local/bin/gpuportal-srun)")
	}
	checkHealth("agent", agentStage, "")
}

// stageRuns reports whether one RUN of the stage holds every word given.
func stageRuns(stage []dockerStep, words ...string) bool {
	for _, s := range stage {
		if s.cmd != "RUN" {
			continue
		}
		all := true
		for _, w := range words {
			all = all && strings.Contains(s.args, w)
		}
		if all {
			return true
		}
	}
	return false
}

// healthcheck returns the argv of the stage's HEALTHCHECK ... CMD [...].
func healthcheck(t *testing.T, stage []dockerStep) []string {
	t.Helper()
	for _, s := range stage {
		if s.cmd != "HEALTHCHECK" {
			continue
		}
		_, js, ok := strings.Cut(s.args, "CMD ")
		var argv []string
		if !ok || json.Unmarshal([]byte(strings.TrimSpace(js)), &argv) != nil {
			t.Errorf("Dockerfile:%d: HEALTHCHECK %s: want [options] CMD [\"gpuportal\", ...] (the JSON form: no shell needed)", s.line, s.args)
			return nil
		}
		return argv
	}
	t.Errorf("Dockerfile stage at line %d has no HEALTHCHECK", stage[0].line)
	return nil
}

// runStage reads a run stage's USER, VOLUME, EXPOSE and its default
// command line (ENTRYPOINT then CMD, both in the JSON form).
func runStage(t *testing.T, stage []dockerStep) (user, volume, expose string, argv []string) {
	t.Helper()
	var entrypoint, command []string
	for _, s := range stage {
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
	return user, volume, expose, append(slices.Clone(entrypoint), command...)
}
