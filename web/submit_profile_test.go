package web

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/api"
	"github.com/gpuportal/gpuportal/app"
	"github.com/gpuportal/gpuportal/models"
	"github.com/gpuportal/gpuportal/templates"
)

func TestSubmitProfileRejects(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	const job = `"name":"p","gpus":1,"sim":{"duration_s":60}`
	tests := []struct {
		name, profile, field string
	}{
		{"empty object", `{}`, "cpu_profile"},
		{"unknown family", `{"family":"image"}`, "cpu_profile.family"},
		{"point of one number", `{"cpu_curve":[[1]]}`, "cpu_profile.cpu_curve"},
		{"point of three numbers", `{"cpu_curve":[[1,0.5,2]]}`, "cpu_profile.cpu_curve"},
		{"speed of zero", `{"cpu_curve":[[1,0],[2,1]]}`, "cpu_profile.cpu_curve"},
		{"speed above one", `{"cpu_curve":[[1,0.5],[2,1.5]]}`, "cpu_profile.cpu_curve"},
		{"falling speed", `{"cpu_curve":[[1,0.8],[2,0.6]]}`, "cpu_profile.cpu_curve"},
		{"x out of order", `{"cpu_curve":[[2,0.5],[1,0.8]]}`, "cpu_profile.cpu_curve"},
		{"x repeated", `{"cpu_curve":[[1,0.5],[1,0.8]]}`, "cpu_profile.cpu_curve"},
		{"negative cores", `{"cpu_curve":[[-1,0.5]]}`, "cpu_profile.cpu_curve"},
		{"too many cores per GPU", `{"cpu_curve":[[1,0.5],[1000,1]]}`, "cpu_profile.cpu_curve"},
		{"too much memory per GPU", `{"mem_curve":[[0,0.5],[5000,1]]}`, "cpu_profile.mem_curve"},
		{"falling memory curve", `{"family":"language","mem_curve":[[0,1],[8,0.9]]}`, "cpu_profile.mem_curve"},
		{"too many points", `{"cpu_curve":[` + strings.Repeat("[1,1],", 32) + `[1,1]]}`, "cpu_profile.cpu_curve"},
		{"curve not a list", `{"cpu_curve":"1:0.5"}`, "cpu_profile.cpu_curve"},
		{"speed not a number", `{"cpu_curve":[[1,"fast"]]}`, "cpu_profile.cpu_curve"},
		{"unknown field", `{"family":"language","gpu_curve":[[1,1]]}`, "unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", `{`+job+`,"cpu_profile":`+tc.profile+`}`)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			var e struct{ Error string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(e.Error, tc.field) {
				t.Fatalf("error %q does not name %s", e.Error, tc.field)
			}
		})
	}
}

// TestSubmitProfileStores: a declared profile is kept with the job and
// shown in its JSON and on its page as declared; a curve replaces the
// family's for its resource only.
func TestSubmitProfileStores(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	tests := []struct {
		name, profile, family string
		cpu, mem              [][2]float64
		page                  string
	}{
		{"family", `{"family":"speech"}`, "speech",
			[][2]float64{{0, 0}, {1, 0.35}, {3, 0.7}, {6, 1}}, [][2]float64{{0, 0.8}, {32, 1}}, "declared: speech (catalogue)"},
		{"curves", `{"cpu_curve":[[1,0.4],[2,0.7],[4,1]]}`, app.FamilyCustom,
			[][2]float64{{1, 0.4}, {2, 0.7}, {4, 1}}, [][2]float64{}, "declared: custom: CPU 1:0.4, 2:0.7, 4:1; memory flat"},
		{"family with a CPU curve", `{"family":"recommendation","cpu_curve":[[0.5,1]]}`, app.FamilyCustom,
			[][2]float64{{0.5, 1}}, [][2]float64{{0, 0.4}, {32, 0.6}, {64, 0.85}, {96, 1}}, "declared: custom: CPU 0.5:1; memory 0:0.4, 32:0.6"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", `{"name":"p","gpus":1,"sim":{"duration_s":60},"cpu_profile":`+tc.profile+`}`)
			if rec.Code != http.StatusCreated {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			var j api.Job
			if err := json.Unmarshal(rec.Body.Bytes(), &j); err != nil {
				t.Fatal(err)
			}
			p := j.CPUProfile
			if p == nil || p.Source != "declared" || p.Family != tc.family || !reflect.DeepEqual(p.CPU, tc.cpu) || !reflect.DeepEqual(p.Mem, tc.mem) {
				t.Fatalf("cpu_profile %+v, want declared %s with cpu %v and mem %v", p, tc.family, tc.cpu, tc.mem)
			}
			// Read back from the store, not only echoed.
			got := ts.do(t, "alice", http.MethodGet, "/api/v1/jobs/"+itoa(j.ID), "")
			var again api.Job
			if err := json.Unmarshal(got.Body.Bytes(), &again); err != nil || !reflect.DeepEqual(again.CPUProfile, p) {
				t.Fatalf("GET job: cpu_profile %+v (%v), want %+v", again.CPUProfile, err, p)
			}
			page := ts.do(t, "alice", http.MethodGet, "/jobs/"+itoa(j.ID), "")
			if !strings.Contains(page.Body.String(), tc.page) {
				t.Errorf("job page does not say %q", tc.page)
			}
		})
	}
	rec := ts.do(t, "alice", http.MethodPost, "/api/v1/jobs", `{"name":"p","gpus":1,"sim":{"duration_s":60}}`)
	if strings.Contains(rec.Body.String(), "cpu_profile") {
		t.Errorf("a job with no declared profile shows one: %s", rec.Body)
	}
}

func TestSubmitProfileForm(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	form := func(family, cpu string) string {
		v := url.Values{"name": {"p"}, "gpus": {"1"}, "kind": {"sim"}, "duration_s": {"60"},
			"cpu_family": {family}, "cpu_curve": {cpu}}
		return v.Encode()
	}
	rec := ts.do(t, "alice", http.MethodPost, "/jobs", form("", "1:0.4, 2:0.7; 4:1"))
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("status %d, want a redirect to the job: %s", rec.Code, rec.Body)
	}
	page := ts.do(t, "alice", http.MethodGet, rec.Header().Get("Location"), "")
	if !strings.Contains(page.Body.String(), "declared: custom: CPU 1:0.4, 2:0.7, 4:1") {
		t.Errorf("job page does not show the declared curve")
	}
	for _, tc := range []struct{ name, family, cpu, field string }{
		{"not x:speed", "", "1-0.4", "cpu_profile.cpu_curve"},
		{"falling", "", "1:0.9,2:0.5", "cpu_profile.cpu_curve"},
		{"unknown family", "vision", "", "cpu_profile.family"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := ts.do(t, "alice", http.MethodPost, "/jobs", form(tc.family, tc.cpu))
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", rec.Code)
			}
			name := map[string]string{"cpu_profile.cpu_curve": `name="cpu_curve"`, "cpu_profile.family": `name="cpu_family"`}[tc.field]
			body := rec.Body.String()
			i := strings.Index(body, name)
			if i < 0 || !strings.Contains(body[i:min(i+300, len(body))], `aria-invalid="true"`) || !strings.Contains(body[i:], `role="alert"`) {
				t.Errorf("form does not mark %s", tc.field)
			}
		})
	}
}

func TestParseCurve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    [][]float64
		wantErr bool
	}{
		{"", nil, false},
		{"1:0.4,2:0.7,4:1", [][]float64{{1, 0.4}, {2, 0.7}, {4, 1}}, false},
		{" 0:0.8 ; 32:1 ", [][]float64{{0, 0.8}, {32, 1}}, false},
		{"1:0.4,,2:1", [][]float64{{1, 0.4}, {2, 1}}, false},
		{"1", nil, true},
		{"a:1", nil, true},
		{"1:b", nil, true},
		{strings.Repeat("1:1,", 33), nil, true},
	}
	for _, tc := range tests {
		got, err := api.ParseCurve(tc.in)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("api.ParseCurve(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestProfileTemplateRoundTrip: a job saved as a template declares the
// same profile again, through the API body and through the form.
func TestProfileTemplateRoundTrip(t *testing.T) {
	t.Parallel()
	for _, decl := range []*api.CPUProfileRequest{
		{Family: "image-cnn"},
		{CPUCurve: [][]float64{{1, 0.4}, {2, 0.7}, {4, 1}}},
		{Family: "recommendation", CPUCurve: [][]float64{{0.5, 1}}},
	} {
		fe := fieldErrors{}
		want := app.DeclaredProfile(api.SubmitRequest{CPUProfile: decl}, fe)
		if len(fe) > 0 {
			t.Fatalf("%+v: %v", decl, fe)
		}
		var j models.Job
		if err := j.SetDeclaredProfile(want); err != nil {
			t.Fatal(err)
		}
		p, err := j.DeclaredProfile()
		if err != nil {
			t.Fatal(err)
		}
		again := app.ProfileRequest(p)
		if got := app.DeclaredProfile(api.SubmitRequest{CPUProfile: again}, fe); len(fe) > 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: the template declares %+v, giving %+v (%v); want %+v", decl, again, got, fe, want)
		}
		var f templates.SubmitForm
		fillProfileForm(&f, again)
		var req api.SubmitRequest
		profileRequest(f, &req, fe)
		if got := app.DeclaredProfile(req, fe); len(fe) > 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: the form (%q, %q, %q) gives %+v (%v); want %+v", decl, f.CPUFamily, f.CPUCurve, f.MemCurve, got, fe, want)
		}
	}
}
