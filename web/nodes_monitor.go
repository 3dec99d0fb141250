package web

// placementLiveMemory says why the live GPU memory of the machines of a
// placement ("node:index" per GPU) is unknown; empty when it is known on
// all of them (app.App.PlacementLiveMemory).
func (s *Server) placementLiveMemory(placement []string) string {
	return s.app.PlacementLiveMemory(placement)
}
