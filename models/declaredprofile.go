package models

import (
	"encoding/json"
	"fmt"

	"github.com/gpuportal/gpuportal/core/synergy"
)

// declaredProfile is how Job.CPUProfile keeps a declared sensitivity
// profile: the family it names (or "declared") and both curves as
// [x, speed] points, already resolved from the catalogue.
type declaredProfile struct {
	Family string       `json:"family"`
	CPU    [][2]float64 `json:"cpu,omitempty"`
	Mem    [][2]float64 `json:"mem,omitempty"`
}

// SetDeclaredProfile stores p as the job's declared profile; nil clears it.
func (j *Job) SetDeclaredProfile(p *synergy.Profile) error {
	if p == nil {
		j.CPUProfile = ""
		return nil
	}
	d := declaredProfile{Family: p.Family}
	for _, pt := range p.CPU {
		d.CPU = append(d.CPU, [2]float64{pt.X, pt.Speed})
	}
	for _, pt := range p.Mem {
		d.Mem = append(d.Mem, [2]float64{pt.X, pt.Speed})
	}
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("job %d: encode declared profile: %w", j.ID, err)
	}
	j.CPUProfile = string(b)
	return nil
}

// DeclaredProfile is the profile the user declared for the job; nil when
// none was.
func (j *Job) DeclaredProfile() (*synergy.Profile, error) {
	if j.CPUProfile == "" {
		return nil, nil
	}
	var d declaredProfile
	if err := json.Unmarshal([]byte(j.CPUProfile), &d); err != nil {
		return nil, fmt.Errorf("job %d: declared profile: %w", j.ID, err)
	}
	p := &synergy.Profile{Family: d.Family}
	for _, pt := range d.CPU {
		p.CPU = append(p.CPU, synergy.Point{X: pt[0], Speed: pt[1]})
	}
	for _, pt := range d.Mem {
		p.Mem = append(p.Mem, synergy.Point{X: pt[0], Speed: pt[1]})
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("job %d: declared profile: %w", j.ID, err)
	}
	return p, nil
}
