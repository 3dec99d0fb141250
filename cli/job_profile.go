package cli

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/client"
	"github.com/spf13/pflag"
)

// profileFlags are the flags of gpuportal job submit that declare the
// job's CPU and host memory sensitivity (docs/synergy.md).
type profileFlags struct {
	family, cpu, mem string
}

func (p *profileFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&p.family, "cpu-profile", "", "declare the job's CPU and memory sensitivity by a catalogue family: image-cnn, language, speech, recommendation or insensitive")
	fs.StringVar(&p.cpu, "cpu-curve", "", "declare the job's speed (0 to 1) against cores per GPU, as x:speed pairs such as 1:0.4,2:0.7,4:1 (replaces the family's)")
	fs.StringVar(&p.mem, "mem-curve", "", "declare the job's speed against GiB of host memory per GPU, such as 0:0.8,32:1 (replaces the family's)")
}

// request is the declared profile the flags give; nil when none. The
// server checks the values; here only the syntax, naming the flag.
func (p profileFlags) request() (*api.CPUProfileRequest, error) {
	r := api.CPUProfileRequest{Family: strings.TrimSpace(p.family)}
	for _, f := range []struct {
		name, v string
		into    *[][]float64
	}{
		{"--cpu-curve", p.cpu, &r.CPUCurve},
		{"--mem-curve", p.mem, &r.MemCurve},
	} {
		pts, err := api.ParseCurve(f.v)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", f.name, f.v, err)
		}
		*f.into = pts
	}
	if r.Family == "" && len(r.CPUCurve) == 0 && len(r.MemCurve) == 0 {
		return nil, nil
	}
	return &r, nil
}

// profileLine says what sensitivity profile a job's user declared.
func profileLine(p *api.CPUProfile) string {
	curve := func(pts [][2]float64) string {
		if len(pts) == 0 {
			return "flat"
		}
		parts := make([]string, len(pts))
		for i, pt := range pts {
			parts[i] = strconv.FormatFloat(pt[0], 'g', 4, 64) + ":" + strconv.FormatFloat(pt[1], 'g', 3, 64)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprintf("declared %s: CPU %s; memory %s", p.Family, curve(p.CPU), curve(p.Mem))
}

// submitFlagOf names the flag of gpuportal job submit that sets each
// field of a submission, as the server's 400 names it; most specific
// first.
var submitFlagOf = []struct{ field, flag string }{
	{"cpu_profile.family", "--cpu-profile"}, {"cpu_profile.cpu_curve", "--cpu-curve"},
	{"cpu_profile.mem_curve", "--mem-curve"}, {"cpu_profile", "--cpu-profile"},
	{"sim.duration_s", "--sim-duration"}, {"sim", "--sim-duration"}, {"name", "--name"},
	{"team", "--team"}, {"gpus", "--gpus"}, {"command", "the command after --"}, {"image", "--image"},
	{"gpu_mem_gb", "--gpu-mem-gb"}, {"model", "--model"}, {"sharing", "--share"},
	{"gpu_fraction", "--gpu-fraction"}, {"mem_persistent_mib", "--mem-persistent-mib"},
	{"mem_ephemeral_mib", "--mem-ephemeral-mib"}, {"batch_size", "--batch-size"},
	{"parameters", "--parameters"}, {"tasks_per_gpu", "--tasks-per-gpu"}, {"priority", "--priority"},
}

// flagForField adds to the server's 400 for a submission the flag that
// sets the field it names ("Fix --cpu-curve.").
func flagForField(err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusBadRequest {
		return err
	}
	for _, f := range append(submitFlagOf, runSubmitFlags...) {
		if strings.HasPrefix(ce.Message, f.field+": ") || strings.HasPrefix(ce.Message, f.field+" ") {
			return withHint(err, "Fix "+f.flag+".")
		}
	}
	return err
}
