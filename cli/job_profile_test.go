package cli

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/gpuportal/gpuportal/core/job"
)

// TestSubmitProfileFlags: --cpu-profile, --cpu-curve and --mem-curve
// become the request's cpu_profile; a curve that is not x:speed pairs is
// refused before anything is sent, naming the flag.
func TestSubmitProfileFlags(t *testing.T) {
	sim := []string{"submit", "--name", "x", "--sim-duration", "60"}
	tests := []struct {
		name    string
		flags   []string
		want    map[string]any // cpu_profile in the body; nil: none
		wantErr string
	}{
		{"none", nil, nil, ""},
		{"family", []string{"--cpu-profile", "image-cnn"}, map[string]any{"family": "image-cnn"}, ""},
		{"curve", []string{"--cpu-curve", "1:0.4,2:0.7,4:1"},
			map[string]any{"cpu_curve": []any{[]any{1.0, 0.4}, []any{2.0, 0.7}, []any{4.0, 1.0}}}, ""},
		{"family and memory curve", []string{"--cpu-profile", "language", "--mem-curve", "0:0.8;32:1"},
			map[string]any{"family": "language", "mem_curve": []any{[]any{0.0, 0.8}, []any{32.0, 1.0}}}, ""},
		{"not x:speed", []string{"--cpu-curve", "1=0.4"}, nil, `--cpu-curve "1=0.4"`},
		{"memory not a number", []string{"--mem-curve", "lots:1"}, nil, "--mem-curve"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeAPI{routes: map[string]fakeAnswer{"POST /api/v1/jobs": {201, jsonOf(t, testJob(7, job.Queued))}}}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			args := append(append([]string{}, sim[:1]...), tc.flags...)
			args = append(args, sim[1:]...)
			_, _, err := jobRun(srv.URL, map[string]string{jobTokenEnv: "tok"}, t.TempDir(), args...)
			got := fake.requests()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || len(got) != 0 {
					t.Fatalf("err = %v, %d requests; want %q and nothing sent", err, len(got), tc.wantErr)
				}
				return
			}
			if err != nil || len(got) != 1 {
				t.Fatalf("err = %v, %d requests", err, len(got))
			}
			want := map[string]any{"name": "x", "team": "", "gpus": 1.0, "sim": map[string]any{"duration_s": 60.0}}
			if tc.want != nil {
				want["cpu_profile"] = tc.want
			}
			wantBody(t, got[0], want)
		})
	}
}

func TestProfileLine(t *testing.T) {
	p := &api.CPUProfile{Source: "declared", Family: "custom", CPU: [][2]float64{{1, 0.4}, {4, 1}}}
	if got, want := profileLine(p), "declared custom: CPU 1:0.4,4:1; memory flat"; got != want {
		t.Errorf("profileLine = %q, want %q", got, want)
	}
}

func TestFlagForField(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&client.Error{Status: 400, Message: "cpu_profile.cpu_curve: point 2: speed 0.4 falls from 0.5"}, "Fix --cpu-curve."},
		{&client.Error{Status: 400, Message: "cpu_profile.family: unknown family \"x\""}, "Fix --cpu-profile."},
		{&client.Error{Status: 400, Message: "sim.duration_s: must be more than 0"}, "Fix --sim-duration."},
		{&client.Error{Status: 400, Message: "gpus: must be at least 1"}, "Fix --gpus."},
		{&client.Error{Status: 400, Message: "command must be given"}, "Fix the command after --."},
		{&client.Error{Status: 400, Message: "body: not JSON"}, ""},
		{&client.Error{Status: 403, Message: "gpus: over your cap"}, ""},
	}
	for _, tc := range tests {
		err := flagForField(tc.err)
		if got := hintOf(err); got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("%v: hint %q (the server's error kept: %v), want %q", tc.err, got, errors.Is(err, tc.err), tc.want)
		}
	}
}
