package web

import (
	"strings"

	"github.com/gpuportal/gpuportal/core/engine"
)

// placementLiveMemory says why the live GPU memory of the machines of a
// placement ("node:index" per GPU) is unknown; empty when it is known on
// all of them.
func (s *Server) placementLiveMemory(placement []string) string {
	var whys []string
	seen := make(map[string]bool)
	for _, p := range placement {
		node, _, _ := strings.Cut(p, ":")
		if seen[node] {
			continue
		}
		seen[node] = true
		for _, n := range s.cfg.Engine.Nodes() {
			if n.Name() == node {
				if why := engine.LiveMemoryUnavailable(n); why != "" {
					whys = append(whys, why)
				}
			}
		}
	}
	return strings.Join(whys, "; ")
}
