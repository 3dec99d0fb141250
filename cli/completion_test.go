package cli

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/server"
)

// TestCompletion: the candidates cobra's scripts get for the word being
// typed (as "gpuportal __complete WORD..."), from the commands, their
// flags and the server.
func TestCompletion(t *testing.T) {
	done := testJob(8, job.Failed)
	fake := &fakeAPI{routes: map[string]fakeAnswer{"GET /api/v1/jobs": {200, jsonOf(t, []api.Job{testJob(7, job.Running), done})}}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	dir := t.TempDir()
	writeTestConfig(t, dir, &cliConfig{CurrentContext: "lab", Contexts: []cliContext{
		{Name: "lab", Server: srv.URL, Token: "tok"}, {Name: "prod", Server: "https://gpus.example.com", Token: "tok-prod"},
	}})
	tests := []struct {
		words     []string
		want      []string // exactly these values, in order, when set
		contains  []string
		lacks     []string
		wantFiles bool
	}{
		{words: []string{"jo"}, want: []string{"job"}},
		{words: []string{""}, contains: []string{"serve", "agent", "admin", "sim", "job", "login", "logout", "config", "version", "completion"}, lacks: []string{"__complete", "agent-watchdog"}},
		{words: []string{"job", "s"}, want: []string{"show", "submit"}},
		{words: []string{"notify", ""}, want: []string{"set", "show", "test"}},
		{words: []string{"notify", "set", "--web"}, want: []string{"--webhook-secret-file", "--webhook-url"}},
		{words: []string{"job", "list", "--st"}, want: []string{"--start", "--state"}},
		{words: []string{"job", "list", "--state", ""}, want: []string{"queued", "running", "preempted", "succeeded", "failed", "cancelled", "timed_out"}},
		{words: []string{"job", "list", "-o", ""}, want: []string{"json", "yaml", "wide", "name"}},
		{words: []string{"job", "list", "--output=w"}, want: []string{"wide"}},
		{words: []string{"job", "submit", "--pa"}, contains: []string{"--parsable", "--parameters"}},
		{words: []string{"job", "submit", "--w"}, want: []string{"--wait"}},
		{words: []string{"job", "submit", "--name", "x", "--", "py"}, want: nil, wantFiles: true},
		{words: []string{"job", "show", ""}, want: []string{"7", "8"}},
		{words: []string{"job", "cancel", ""}, want: []string{"7"}},
		{words: []string{"job", "logs", "--context", "lab", "7"}, want: []string{"7"}},
		{words: []string{"job", "show", "--context", ""}, want: []string{"lab", "prod"}},
		{words: []string{"config", "use-context", "p"}, want: []string{"prod"}},
		{words: []string{"completion", ""}, contains: []string{"bash", "zsh", "fish"}},
		{words: []string{"serve", "--polic"}, want: []string{"--policy"}},
		{words: []string{"serve", "--policy", "tir"}, want: []string{"tiresias-l", "tiresias-g"}},
		{words: []string{"agent", "--ca", ""}, want: nil, wantFiles: true},
		{words: []string{"sim", "--tra"}, want: []string{"--trace"}},
		{words: []string{"admin", "create-u"}, want: []string{"create-user"}},
		{words: []string{"admin", "create-user", "--r"}, want: []string{"--role"}},
		{words: []string{"admin", "create-user", "--role", ""}, want: []string{"researcher", "lead", "admin"}},
		{words: []string{"login", "--"}, contains: []string{"--server", "--context", "--user", "--password-stdin", "--token-stdin"}},
		{words: []string{"version", "-o", ""}, want: []string{"json", "yaml"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.words, " "), func(t *testing.T) {
			var out, errOut strings.Builder
			c := jobCmd{getenv: func(string) string { return "" }, configDir: func() (string, error) { return dir, nil },
				http: http.DefaultClient, stdout: &out, stderr: &errOut, serve: server.Define}
			if err := c.execute(context.Background(), append([]string{cobra.ShellCompRequestCmd}, tc.words...)); err != nil {
				t.Fatalf("__complete: %v\n%s", err, errOut.String())
			}
			got, directive := completions(t, out.String(), tc.words[len(tc.words)-1])
			if tc.want != nil || (tc.contains == nil && tc.lacks == nil) {
				if strings.Join(got, " ") != strings.Join(tc.want, " ") {
					t.Errorf("candidates %q, want %q", got, tc.want)
				}
			}
			for _, w := range tc.contains {
				if !slices.Contains(got, w) {
					t.Errorf("candidates %q lack %q", got, w)
				}
			}
			for _, w := range tc.lacks {
				if slices.Contains(got, w) {
					t.Errorf("candidates %q hold %q", got, w)
				}
			}
			files := directive&(cobra.ShellCompDirectiveNoFileComp|cobra.ShellCompDirectiveError) == 0
			if files != tc.wantFiles {
				t.Errorf("file completion %v (directive %d), want %v", files, directive, tc.wantFiles)
			}
		})
	}
	for _, r := range fake.requests() {
		if r.auth != "Bearer tok" {
			t.Errorf("completion sent %q to the lab server", r.auth)
		}
	}
}

// completions reads what __complete printed: the candidates that start
// with the word typed (the shells filter so), their descriptions left
// out, and the directive on the last line.
func completions(t *testing.T, out, typed string) ([]string, cobra.ShellCompDirective) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	last := lines[len(lines)-1]
	d, err := strconv.Atoi(strings.TrimPrefix(last, ":"))
	if !strings.HasPrefix(last, ":") || err != nil {
		t.Fatalf("__complete printed no directive:\n%s", out)
	}
	_, value, ok := strings.Cut(typed, "=")
	if !ok || !strings.HasPrefix(typed, "-") {
		value = typed
	}
	var got []string
	for _, l := range lines[:len(lines)-1] {
		v, _, _ := strings.Cut(l, "\t")
		if strings.HasPrefix(v, value) || strings.HasPrefix(v, typed) {
			got = append(got, v)
		}
	}
	return got, cobra.ShellCompDirective(d)
}

// TestCompletionScripts: each shell's script asks the binary for the
// candidates.
func TestCompletionScripts(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		var out, errOut strings.Builder
		c := jobCmd{stdout: &out, stderr: &errOut}
		if err := c.execute(context.Background(), []string{"completion", sh}); err != nil {
			t.Fatalf("completion %s: %v", sh, err)
		}
		if !strings.Contains(out.String(), cobra.ShellCompRequestCmd) {
			t.Errorf("the %s script does not call %s", sh, cobra.ShellCompRequestCmd)
		}
	}
	var out, errOut strings.Builder
	c := jobCmd{stdout: &out, stderr: &errOut}
	if err := c.execute(context.Background(), []string{"completion", "tcsh"}); err == nil || !strings.Contains(err.Error(), `"tcsh"`) {
		t.Errorf("completion tcsh: err = %v", err)
	}
}
