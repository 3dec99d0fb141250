package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// contractBase is the server URL the validator's copy of web/openapi.json
// names; requests are rewritten onto it before they are matched, so one
// router serves every test server whatever its port.
const contractBase = "http://gpuportal.test/api/v1"

// contract loads web/openapi.json once per test binary and builds the
// router that finds each exchange's operation.
var contract = sync.OnceValues(func() (routers.Router, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../web/openapi.json")
	if err != nil {
		return nil, fmt.Errorf("load web/openapi.json: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("web/openapi.json is not a valid OpenAPI document: %w", err)
	}
	doc.Servers = openapi3.Servers{{URL: contractBase}}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("router for web/openapi.json: %w", err)
	}
	return r, nil
})

// checkContract validates one API exchange against web/openapi.json: the
// request (path, query, body) and the response (status documented, body
// matching its schema, required fields present, no null where the
// document does not allow one). It returns every mismatch, or nil.
func checkContract(req *http.Request, reqBody []byte, status int, header http.Header, respBody []byte) error {
	if !strings.HasPrefix(req.URL.Path, "/api/v1/") {
		// Pages and what an interactive session serves through the
		// portal's proxy (/sessions/ID/SECRET/...) are not the REST API.
		return nil
	}
	router, err := contract()
	if err != nil {
		return err
	}
	u, err := url.Parse(contractBase + strings.TrimPrefix(req.URL.Path, "/api/v1"))
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", req.URL, err)
	}
	u.RawQuery = req.URL.RawQuery
	r := req.Clone(context.Background())
	r.URL = u
	r.Host = u.Host
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := router.FindRoute(r)
	if err != nil {
		return fmt.Errorf("%s %s: no operation in web/openapi.json: %w", req.Method, req.URL.Path, err)
	}
	opts := &openapi3filter.Options{
		// The tests authenticate with real tokens; the server, not the
		// document, decides who may ask (authz_test.go).
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
		MultiError:         true,
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	var errs []string
	// A request the server refuses (4xx) may break the contract on purpose:
	// the tests send bad input to check the answer names the field.
	if status < 400 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			errs = append(errs, "request: "+err.Error())
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		errs = append(errs, fmt.Sprintf("response %d: %v", status, err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s %s breaks web/openapi.json:\n%s\nbody: %.2000s", req.Method, req.URL.RequestURI(), strings.Join(errs, "\n"), respBody)
	}
	return nil
}

func TestContractCatchesDrift(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/api/v1/gpus", nil)
	h := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct {
		name   string
		status int
		body   string
		ok     bool
	}{
		{"empty list", 200, `[]`, true},
		{"null where an array is documented", 200, `null`, false},
		{"undocumented status", 418, `{}`, false},
		{"wrong type", 200, `{"gpus":1}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkContract(req, nil, tc.status, h, []byte(tc.body))
			if (err == nil) != tc.ok {
				t.Fatalf("checkContract(%d %s) = %v, want ok=%v", tc.status, tc.body, err, tc.ok)
			}
		})
	}
}
