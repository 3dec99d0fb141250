package agent

import (
	"fmt"
	"strings"
	"testing"
)

func TestAgentURLs(t *testing.T) {
	tests := []struct {
		name, servers string
		want          []string
		wantErr       string
	}{
		{"one server", "https://gpus.example.com", []string{"wss://gpus.example.com/api/v1/agents/connect"}, ""},
		{"replicas in order, spaces trimmed", "http://a:8080, http://b:8080/portal/",
			[]string{"ws://a:8080/api/v1/agents/connect", "ws://b:8080/portal/api/v1/agents/connect"}, ""},
		{"empty parts skipped", "http://a:8080,,", []string{"ws://a:8080/api/v1/agents/connect"}, ""},
		{"nothing given", " , ", nil, "no server URL"},
		{"one bad URL fails all", "http://a:8080,ftp://b", nil, "want http:// or https://"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := agentURLs(tc.servers)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("agentURLs(%q) = %v, %v; want an error naming %q", tc.servers, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("agentURLs(%q) = %v, %v; want %v", tc.servers, got, err, tc.want)
			}
		})
	}
}
