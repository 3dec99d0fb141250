package web

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/gpuportal/gpuportal/api"
)

type openAPIDoc struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"schemas"`
	} `json:"components"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

// TestOpenAPIMatchesRoutes checks that every API route is documented with
// its method, and that the document names no route that does not exist.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	ts := newTestServer(t)
	served := map[string]bool{}
	for _, r := range ts.echo.Routes() {
		path, ok := strings.CutPrefix(r.Path, "/api/v1")
		if !ok || r.Method == echo.RouteNotFound || path == "" || path == "/*" {
			continue
		}
		// echo writes :id where OpenAPI writes {id}.
		parts := strings.Split(path, "/")
		for i, p := range parts {
			if name, ok := strings.CutPrefix(p, ":"); ok {
				parts[i] = "{" + name + "}"
			}
		}
		key := strings.ToLower(r.Method) + " " + strings.Join(parts, "/")
		served[key] = true
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented[method+" "+path] = true
			}
		}
	}
	var missing, extra []string
	for k := range served {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	for k := range documented {
		if !served[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("routes not in openapi.json: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("openapi.json documents routes that do not exist: %v", extra)
	}
}

// TestOpenAPISchemasMatchTypes checks the documented objects against the
// JSON the handlers write.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, typ := range map[string]reflect.Type{
		"Job":                        reflect.TypeOf(api.Job{}),
		"SubmitRequest":              reflect.TypeOf(SubmitRequest{}),
		"Node":                       reflect.TypeOf(api.Node{}),
		"Event":                      reflect.TypeOf(api.Event{}),
		"JCTStats":                   reflect.TypeOf(api.JCTStats{}),
		"Queues":                     reflect.TypeOf(api.Queues{}),
		"Template":                   reflect.TypeOf(TemplateJSON{}),
		"Estimates":                  reflect.TypeOf(api.ForecastStats{}),
		"Forecast":                   reflect.TypeOf(api.Forecast{}),
		"Calibration":                reflect.TypeOf(api.Calibration{}),
		"ForecastRun":                reflect.TypeOf(api.ForecastRun{}),
		"TeamShare":                  reflect.TypeOf(api.TeamShare{}),
		"GPUSeries":                  reflect.TypeOf(api.GPUSeries{}),
		"Point":                      reflect.TypeOf(api.Point{}),
		"JobMemory":                  reflect.TypeOf(api.JobMemory{}),
		"GPULanes":                   reflect.TypeOf(api.GPULanes{}),
		"Lane":                       reflect.TypeOf(api.Lane{}),
		"LaneJob":                    reflect.TypeOf(api.LaneJob{}),
		"JobLane":                    reflect.TypeOf(api.JobLane{}),
		"MemoryEstimate":             reflect.TypeOf(api.MemoryEstimate{}),
		"JobResources":               reflect.TypeOf(api.JobResources{}),
		"Allocation":                 reflect.TypeOf(api.Allocation{}),
		"CPUProfile":                 reflect.TypeOf(api.CPUProfile{}),
		"JoinToken":                  reflect.TypeOf(api.JoinToken{}),
		"NewJoinToken":               reflect.TypeOf(api.NewJoinToken{}),
		"Machine":                    reflect.TypeOf(api.Machine{}),
		"User":                       reflect.TypeOf(api.User{}),
		"APIToken":                   reflect.TypeOf(api.APIToken{}),
		"AccountChange":              reflect.TypeOf(api.AccountChange{}),
		"Notification":               reflect.TypeOf(api.Notification{}),
		"NotificationSettings":       reflect.TypeOf(api.NotificationSettings{}),
		"NotificationSettingsUpdate": reflect.TypeOf(api.NotificationSettingsUpdate{}),
		"NotificationTest":           reflect.TypeOf(api.NotificationTest{}),
		"Version":                    reflect.TypeOf(api.Version{}),
		"JobUsage":                   reflect.TypeOf(api.JobUsage{}),
		"GPUUsage":                   reflect.TypeOf(api.GPUUsage{}),
		"UsagePoint":                 reflect.TypeOf(api.UsagePoint{}),
		"Idle":                       reflect.TypeOf(api.Idle{}),
		"Accounting":                 reflect.TypeOf(api.Accounting{}),
		"AccountingRow":              reflect.TypeOf(api.AccountingRow{}),
	} {
		var fields, props []string
		for i := range typ.NumField() {
			tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if tag != "" && tag != "-" {
				fields = append(fields, tag)
			}
		}
		for p := range doc.Components.Schemas[name].Properties {
			props = append(props, p)
		}
		sort.Strings(fields)
		sort.Strings(props)
		if !reflect.DeepEqual(fields, props) {
			t.Errorf("schema %s has %v; %s writes %v", name, props, typ.Name(), fields)
		}
	}
}
