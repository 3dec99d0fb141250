package web

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

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
	t.Parallel()
	doc := loadOpenAPI(t)
	ts := newTestServer(t)
	served := map[string]bool{}
	for _, r := range ts.echo.Routes() {
		path, ok := openAPIPath(r.Path)
		if !ok || r.Method == echo.RouteNotFound {
			continue
		}
		served[strings.ToLower(r.Method)+" "+path] = true
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

// openAPIPath is the document's path of an API route as echo registers
// it (/api/v1/jobs/:id is /jobs/{id}); false for other routes.
func openAPIPath(route string) (string, bool) {
	path, ok := strings.CutPrefix(route, "/api/v1")
	if !ok || path == "" || path == "/*" {
		return "", false
	}
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if name, ok := strings.CutPrefix(p, ":"); ok {
			parts[i] = "{" + name + "}"
		}
	}
	return strings.Join(parts, "/"), true
}

// TestOpenAPISchemasMatchTypes checks the documented objects against the
// JSON the handlers write.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	for name, typ := range map[string]reflect.Type{
		"Job":                        reflect.TypeOf(api.Job{}),
		"SubmitRequest":              reflect.TypeOf(api.SubmitRequest{}),
		"Node":                       reflect.TypeOf(api.Node{}),
		"Event":                      reflect.TypeOf(api.Event{}),
		"JCTStats":                   reflect.TypeOf(api.JCTStats{}),
		"Queues":                     reflect.TypeOf(api.Queues{}),
		"Template":                   reflect.TypeOf(TemplateJSON{}),
		"Estimates":                  reflect.TypeOf(api.ForecastStats{}),
		"Forecast":                   reflect.TypeOf(api.Forecast{}),
		"Reservation":                reflect.TypeOf(api.Reservation{}),
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
		"TokenRequest":               reflect.TypeOf(api.TokenRequest{}),
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
		"IdlePolicy":                 reflect.TypeOf(api.IdlePolicy{}),
		"IdlePolicyUpdate":           reflect.TypeOf(api.IdlePolicy{}),
		"Session":                    reflect.TypeOf(api.Session{}),
		"Array":                      reflect.TypeOf(api.Array{}),
		"ArrayTask":                  reflect.TypeOf(api.ArrayTask{}),
		"GPUHistory":                 reflect.TypeOf(api.GPUHistory{}),
		"ClusterHistory":             reflect.TypeOf(api.ClusterHistory{}),
		"HistoryPoint":               reflect.TypeOf(api.HistoryPoint{}),
		"Token":                      reflect.TypeOf(api.Token{}),
		"Me":                         reflect.TypeOf(api.Me{}),
		"Error":                      reflect.TypeOf(api.Error{}),
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

// responseTypes are the documented objects the server writes, by schema
// name: TestOpenAPIRequired checks each against its Go type.
func responseTypes() map[string]reflect.Type {
	return map[string]reflect.Type{
		"Job":                  reflect.TypeOf(api.Job{}),
		"Array":                reflect.TypeOf(api.Array{}),
		"Event":                reflect.TypeOf(api.Event{}),
		"JobMemory":            reflect.TypeOf(api.JobMemory{}),
		"GPUSeries":            reflect.TypeOf(api.GPUSeries{}),
		"Node":                 reflect.TypeOf(api.Node{}),
		"Queues":               reflect.TypeOf(api.Queues{}),
		"JCTStats":             reflect.TypeOf(api.JCTStats{}),
		"Template":             reflect.TypeOf(templateResponse{}),
		"Estimates":            reflect.TypeOf(api.ForecastStats{}),
		"Team":                 reflect.TypeOf(api.Team{}),
		"TeamShare":            reflect.TypeOf(api.TeamShare{}),
		"GPUHistory":           reflect.TypeOf(api.GPUHistory{}),
		"ClusterHistory":       reflect.TypeOf(api.ClusterHistory{}),
		"JoinToken":            reflect.TypeOf(api.JoinToken{}),
		"NewJoinToken":         reflect.TypeOf(api.NewJoinToken{}),
		"Machine":              reflect.TypeOf(api.Machine{}),
		"User":                 reflect.TypeOf(api.User{}),
		"APIToken":             reflect.TypeOf(api.APIToken{}),
		"AccountChange":        reflect.TypeOf(api.AccountChange{}),
		"Notification":         reflect.TypeOf(api.Notification{}),
		"NotificationSettings": reflect.TypeOf(api.NotificationSettings{}),
		"NotificationTest":     reflect.TypeOf(api.NotificationTest{}),
		"Version":              reflect.TypeOf(api.Version{}),
		"JobUsage":             reflect.TypeOf(api.JobUsage{}),
		"Accounting":           reflect.TypeOf(api.Accounting{}),
		"Token":                reflect.TypeOf(api.Token{}),
		"Me":                   reflect.TypeOf(api.Me{}),
		"Error":                reflect.TypeOf(api.Error{}),
	}
}

// templateResponse is TemplateJSON as the API writes it: its job is the
// submission as stored, whose own required fields are a request's.
type templateResponse struct {
	ID   int64    `json:"id"`
	Name string   `json:"name"`
	Job  struct{} `json:"job"`
}

// schemaMismatch is one object schema whose required list or nullable
// properties differ from what its Go type writes.
type schemaMismatch struct {
	At       string          // JSON pointer of the object schema
	Have     []string        // its required list
	Required []string        // the properties its type always writes
	Nullable map[string]bool // property -> nullable, where it differs
}

// requiredMismatches walks the response schemas with their Go types: a
// field without omitempty is always written, so its property is
// required; a pointer without omitempty may be null, so its property is
// nullable (and no other is).
func requiredMismatches(t *testing.T) []schemaMismatch {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	c := requiredChecker{doc: doc, seen: map[string]bool{}}
	names := make([]string, 0, len(responseTypes()))
	types := responseTypes()
	for n := range types {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c.check("/components/schemas/"+n, types[n])
	}
	return c.out
}

type requiredChecker struct {
	doc  map[string]any
	seen map[string]bool
	out  []schemaMismatch
}

// node is the schema at JSON pointer p.
func (c *requiredChecker) node(p string) map[string]any {
	var cur any = c.doc
	for _, part := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			cur = v[part]
		case []any:
			i, _ := strconv.Atoi(part)
			cur = v[i]
		}
	}
	m, _ := cur.(map[string]any)
	return m
}

// resolve follows a $ref, or an allOf of one $ref (the document's way
// of making a reference nullable or describing it), to the object it
// names.
func (c *requiredChecker) resolve(p string) string {
	for range 4 {
		n := c.node(p)
		if ref, ok := n["$ref"].(string); ok {
			p = strings.TrimPrefix(ref, "#")
			continue
		}
		if all, ok := n["allOf"].([]any); ok && len(all) == 1 {
			p += "/allOf/0"
			continue
		}
		break
	}
	return p
}

// parts are the object schemas that make up the one at p: itself, or
// each member of its allOf.
func (c *requiredChecker) parts(p string) []string {
	n := c.node(p)
	all, ok := n["allOf"].([]any)
	if !ok {
		return []string{p}
	}
	var out []string
	for i := range all {
		out = append(out, c.resolve(fmt.Sprintf("%s/allOf/%d", p, i)))
	}
	return out
}

func (c *requiredChecker) check(p string, typ reflect.Type) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ.Kind() {
	case reflect.Slice, reflect.Array:
		if typ.Elem().Kind() != reflect.Uint8 {
			c.check(c.resolve(p+"/items"), typ.Elem())
		}
		return
	case reflect.Map:
		c.check(c.resolve(p+"/additionalProperties"), typ.Elem())
		return
	case reflect.Struct:
	default:
		return
	}
	if typ == reflect.TypeOf(time.Time{}) || typ.NumField() == 0 {
		return
	}
	p = c.resolve(p)
	key := p + " " + typ.String()
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	parts := c.parts(p)
	want := map[string][]string{}
	nullable := map[string]map[string]bool{}
	for _, f := range jsonFields(typ) {
		where := ""
		for _, part := range parts {
			if props, _ := c.node(part)["properties"].(map[string]any); props[f.name] != nil {
				where = part
				break
			}
		}
		if where == "" {
			continue // TestOpenAPISchemasMatchTypes reports it
		}
		prop := where + "/properties/" + f.name
		if !f.omitempty {
			want[where] = append(want[where], f.name)
		}
		isNull, _ := c.node(prop)["nullable"].(bool)
		if wantNull := !f.omitempty && f.typ.Kind() == reflect.Pointer; isNull != wantNull {
			if nullable[where] == nil {
				nullable[where] = map[string]bool{}
			}
			nullable[where][f.name] = wantNull
		}
		c.check(prop, f.typ)
	}
	for _, part := range parts {
		have := asList(c.node(part)["required"])
		w := want[part]
		if w == nil {
			w = []string{}
		}
		if !sameSet(have, w) || len(nullable[part]) > 0 {
			c.out = append(c.out, schemaMismatch{At: part, Have: have, Required: w, Nullable: nullable[part]})
		}
	}
}

type jsonField struct {
	name      string
	omitempty bool
	typ       reflect.Type
}

// jsonFields are the fields encoding/json writes for typ, embedded
// structs' included.
func jsonFields(typ reflect.Type) []jsonField {
	var out []jsonField
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		out = append(out, jsonField{name: name, omitempty: omit, typ: f.Type})
	}
	return out
}

func asList(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, s := range l {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

// TestOpenAPIRequired checks that every response object lists as
// required exactly the properties the server always writes, and marks
// nullable exactly those it may write as null, so that generated clients
// get plain fields where a value is always there.
func TestOpenAPIRequired(t *testing.T) {
	t.Parallel()
	for _, m := range requiredMismatches(t) {
		t.Errorf("%s: required %v, want %v; nullable to change: %v", m.At, m.Have, m.Required, m.Nullable)
	}
}
