package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/job"
)

func TestAgentURL(t *testing.T) {
	tests := []struct {
		server, want, wantErr string
	}{
		{"http://127.0.0.1:8080", "ws://127.0.0.1:8080/api/v1/agents/connect", ""},
		{"https://gpus.example.com/", "wss://gpus.example.com/api/v1/agents/connect", ""},
		{"https://example.com/portal?x=1", "wss://example.com/portal/api/v1/agents/connect", ""},
		{"wss://example.com", "wss://example.com/api/v1/agents/connect", ""},
		{"ftp://example.com", "", "http"},
		{"example.com:8080", "", "http"},
		{"http://", "", "no host"},
	}
	for _, tc := range tests {
		got, err := agentURL(tc.server)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("agentURL(%q) = %q, %v; want an error naming %q", tc.server, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("agentURL(%q) = %q, %v; want %q", tc.server, got, err, tc.want)
		}
	}
}

func TestNewClientChecksItsConfig(t *testing.T) {
	a, _ := newTestAgent(t, time.Second)
	exits := make(chan job.Exit)
	tests := []struct {
		name    string
		cfg     ClientConfig
		wantErr string
	}{
		{"no token", ClientConfig{Server: "http://s", Nodes: []*Local{a}, Exits: exits}, "token"},
		{"no nodes", ClientConfig{Server: "http://s", Token: "t", Exits: exits}, "no nodes"},
		{"bad URL", ClientConfig{Server: "s:1", Token: "t", Nodes: []*Local{a}, Exits: exits}, "http"},
		{"same node twice", ClientConfig{Server: "http://s", Token: "t", Nodes: []*Local{a, a}, Exits: exits}, "two nodes"},
		{"good", ClientConfig{Server: "http://s", Token: "t", Nodes: []*Local{a}, Exits: exits}, ""},
	}
	for _, tc := range tests {
		_, err := NewClient(tc.cfg)
		if (tc.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}
