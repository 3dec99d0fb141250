package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/core/job"
)

// TestCompletion: the candidates for the word being typed, from the
// command table, the commands' own flag sets and the server.
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
		{words: []string{""}, contains: []string{"serve", "agent", "admin", "sim", "job", "login", "logout", "config", "version", "completion"}, lacks: []string{completeCommand, "agent-watchdog"}},
		{words: []string{"job", "s"}, want: []string{"submit", "show"}},
		{words: []string{"notify", ""}, want: []string{"show", "set", "test"}},
		{words: []string{"notify", "set", "--web"}, want: []string{"--webhook-secret-file", "--webhook-url"}},
		{words: []string{"job", "list", "--st"}, want: []string{"--start", "--state"}},
		{words: []string{"job", "list", "--state", ""}, want: []string{"queued", "running", "preempted", "succeeded", "failed", "cancelled", "timed_out"}},
		{words: []string{"job", "list", "-o", ""}, want: []string{"json", "yaml", "wide", "name"}},
		{words: []string{"job", "list", "--output", "=", "y"}, want: []string{"yaml"}},
		{words: []string{"job", "list", "--output=w"}, want: []string{"--output=wide"}},
		{words: []string{"job", "submit", "--pa"}, contains: []string{"--parsable", "--parameters"}},
		{words: []string{"job", "submit", "--w"}, want: []string{"--wait"}},
		{words: []string{"job", "submit", "--name", "x", "--", "py"}, want: nil, wantFiles: true},
		{words: []string{"job", "show", ""}, want: []string{"7", "8"}},
		{words: []string{"job", "cancel", ""}, want: []string{"7"}},
		{words: []string{"job", "logs", "--context", "lab", "7"}, want: []string{"7"}},
		{words: []string{"job", "show", "--context", ""}, want: []string{"lab", "prod"}},
		{words: []string{"config", "use-context", "p"}, want: []string{"prod"}},
		{words: []string{"completion", ""}, want: []string{"bash", "zsh", "fish"}},
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
			c := jobCmd{getenv: func(string) string { return "" }, configDir: func() (string, error) { return dir, nil },
				http: http.DefaultClient, stdout: &strings.Builder{}, stderr: &strings.Builder{}}
			cands, files := c.candidates(context.Background(), tc.words)
			var got []string
			for _, cd := range cands {
				got = append(got, cd.value)
			}
			if tc.want != nil || (tc.contains == nil && tc.lacks == nil) {
				if strings.Join(got, " ") != strings.Join(tc.want, " ") {
					t.Errorf("candidates %q, want %q", got, tc.want)
				}
			}
			for _, w := range tc.contains {
				if !contains(got, w) {
					t.Errorf("candidates %q lack %q", got, w)
				}
			}
			for _, w := range tc.lacks {
				if contains(got, w) {
					t.Errorf("candidates %q hold %q", got, w)
				}
			}
			if files != tc.wantFiles {
				t.Errorf("file completion %v, want %v", files, tc.wantFiles)
			}
		})
	}
	for _, r := range fake.requests() {
		if r.auth != "Bearer tok" {
			t.Errorf("completion sent %q to the lab server", r.auth)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestCompletionScripts: each shell's script calls the hidden command.
func TestCompletionScripts(t *testing.T) {
	for _, sh := range completionShells {
		var out, errOut strings.Builder
		if err := runCompletion([]string{sh}, &out, &errOut); err != nil {
			t.Fatalf("completion %s: %v", sh, err)
		}
		if !strings.Contains(out.String(), completeCommand) {
			t.Errorf("the %s script does not call %s", sh, completeCommand)
		}
	}
	var out, errOut strings.Builder
	if err := runCompletion([]string{"tcsh"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), `unknown shell "tcsh": want bash, zsh or fish`) {
		t.Errorf("completion tcsh: err = %v", err)
	}
}
