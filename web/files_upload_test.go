package web

import (
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuportal/gpuportal/core/agent"
	"github.com/gpuportal/gpuportal/core/gpu"
	"github.com/gpuportal/gpuportal/core/jobfiles"
	"github.com/gpuportal/gpuportal/models"
)

// filesServer is a test server with machine n0, whose agent keeps job
// folders and takes uploads of up to maxUpload bytes, and alice's job that
// ran there; it returns the job and its folder.
func filesServer(t testing.TB, maxUpload int64) (*testServer, int64, string) {
	t.Helper()
	ts := newTestServer(t)
	ctx := context.Background()
	work := t.TempDir()
	a, err := agent.New(agent.Config{Name: "n0", Backend: gpu.NewSim("n0", 1, 16384), WorkDir: work,
		FileLimits: jobfiles.Limits{MaxUpload: maxUpload}}, ts.engine.Exits())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown(context.Background()) })
	if err := ts.engine.AddNode(ctx, a); err != nil {
		t.Fatal(err)
	}
	j := &models.Job{Name: "files", Team: "vision", User: "alice", GPUs: 1, SubmittedAt: time.Now(),
		Command: []string{"sh", "-c", "mkdir results"}}
	if err := ts.store.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ts.engine.Wake()
		got, err := ts.store.Job(ctx, j.ID)
		if err == nil && got.State.Final() {
			if got.State != models.JobSucceeded {
				t.Fatalf("job %d %s: %s", j.ID, got.State, got.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d not done after 20 s: %+v, %v", j.ID, got, err)
		}
	}
	return ts, j.ID, filepath.Join(work, "jobs", strconv.FormatInt(j.ID, 10))
}

// uploadRequest is the files page's upload form as a browser sends it,
// as alice: its token, root and path, then size bytes of file name,
// made as they are read (never held whole). atEnd runs once the file's
// last byte has been read.
func uploadRequest(t testing.TB, ts *testServer, id int64, name string, size int64, atEnd func()) *http.Request {
	t.Helper()
	const boundary = "gpuportalTestBoundary"
	var head strings.Builder
	mw := multipart.NewWriter(&head)
	if err := mw.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	for _, f := range [][2]string{{csrfField, sessionCSRF(ts.sessions["alice"])}, {"root", jobfiles.JobRoot}, {"path", "results"}} {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, name))
	h.Set("Content-Type", "application/octet-stream")
	if _, err := mw.CreatePart(h); err != nil {
		t.Fatal(err)
	}
	tail := "\r\n--" + boundary + "--\r\n"
	body := io.MultiReader(strings.NewReader(head.String()), &endReader{r: io.LimitReader(pattern{}, size), atEnd: atEnd}, strings.NewReader(tail))
	req := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/jobs/%d/files/upload", id), body)
	req.ContentLength = int64(head.Len()) + size + int64(len(tail))
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: ts.sessions["alice"]})
	return req
}

// pattern reads as an endless run of bytes that are not all alike.
type pattern struct{}

func (pattern) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte('a' + i%26)
	}
	return len(p), nil
}

// endReader is r, calling atEnd once r is read to its end.
type endReader struct {
	r     io.Reader
	atEnd func()
	done  bool
}

func (e *endReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF && !e.done {
		e.done = true
		if e.atEnd != nil {
			e.atEnd()
		}
	}
	return n, err
}

// TestFormUploadStreams: the files page's form uploads a file of 48 MiB,
// more than the 32 MiB a parsed multipart form keeps in memory (the rest
// spooled to a temporary file): it streams to the machine's agent as it
// comes. When its last byte has been read, nothing has been spooled to
// the temporary folder, and serving it allocated a small part of its size.
// An upload over the machine's limit is refused with 413 naming it.
func TestFormUploadStreams(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ts, id, jobDir := filesServer(t, 64<<20)
	const size = 48 << 20
	var spooled []string
	req := uploadRequest(t, ts, id, "big.bin", size, func() {
		entries, err := os.ReadDir(tmp)
		if err != nil {
			t.Error(err)
		}
		for _, e := range entries {
			spooled = append(spooled, e.Name())
		}
	})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec := httptest.NewRecorder()
	ts.Handler().ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	if rec.Code != http.StatusSeeOther || !strings.Contains(rec.Header().Get("Location"), "uploaded=big.bin") {
		t.Fatalf("upload: %d %s %s", rec.Code, rec.Header(), rec.Body)
	}
	if len(spooled) > 0 {
		t.Errorf("the upload was spooled to the temporary folder: %v", spooled)
	}
	if fi, err := os.Stat(filepath.Join(jobDir, "results", "big.bin")); err != nil || fi.Size() != size {
		t.Errorf("the uploaded file: %v, %v; want %d bytes", fi, err, size)
	}
	// Whatever else the server did meanwhile (its engine's passes) is
	// counted too: a buffer of the file would be 48 MiB by itself.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/8 {
		t.Errorf("serving a %d MiB upload allocated %.1f MiB; want under %d MiB", size>>20, float64(alloc)/(1<<20), size/8>>20)
	}

	// Over the machine's limit (agent --max-upload): 413, naming it.
	ts2, id2, jobDir2 := filesServer(t, 1<<20)
	rec = httptest.NewRecorder()
	ts2.Handler().ServeHTTP(rec, uploadRequest(t, ts2, id2, "over.bin", 3<<20, nil))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "upload limit of 1 MiB (agent --max-upload)") {
		t.Errorf("upload of 3 MiB over a 1 MiB limit: %d %s", rec.Code, rec.Body)
	}
	if entries, _ := os.ReadDir(filepath.Join(jobDir2, "results")); len(entries) != 0 {
		t.Errorf("a refused upload left %v", entries)
	}
}

// TestFormUploadRefusals: the streamed form checks its token before the
// file, and names what is wrong.
func TestFormUploadRefusals(t *testing.T) {
	ts, id, jobDir := filesServer(t, 1<<20)
	post := func(ctype, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/jobs/%d/files/upload", id), strings.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: ts.sessions["alice"]})
		rec := httptest.NewRecorder()
		ts.Handler().ServeHTTP(rec, req)
		return rec
	}
	form := func(fields [][2]string, file, content string) (string, string) {
		var b strings.Builder
		mw := multipart.NewWriter(&b)
		for _, f := range fields {
			_ = mw.WriteField(f[0], f[1])
		}
		if file != "-" {
			w, _ := mw.CreateFormFile("file", file)
			_, _ = io.WriteString(w, content)
		}
		_ = mw.Close()
		return mw.FormDataContentType(), b.String()
	}
	tok := [2]string{csrfField, sessionCSRF(ts.sessions["alice"])}
	for _, tc := range []struct {
		name   string
		fields [][2]string
		file   string
		status int
		says   string
	}{
		{"no token", [][2]string{{"root", "job"}, {"path", "results"}}, "x.txt", 403, "form has expired"},
		{"a wrong token", [][2]string{{csrfField, "nope"}, {"path", "results"}}, "x.txt", 403, "form has expired"},
		{"no file", [][2]string{tok, {"path", "results"}}, "-", 400, "file: choose a file to upload"},
		{"no file chosen", [][2]string{tok, {"path", "results"}}, "", 400, "file: choose a file to upload"},
		{"out of the folder", [][2]string{tok, {"path", "../.."}}, "x.txt", 400, "is not allowed: paths stay inside their folder"},
		{"a long field", [][2]string{tok, {"path", strings.Repeat("a", 9000)}}, "x.txt", 400, "path: longer than 8192 bytes"},
		{"not UTF-8", [][2]string{tok, {"path", "\xff"}}, "x.txt", 400, "path: is not valid UTF-8"},
	} {
		ctype, body := form(tc.fields, tc.file, "hello")
		// The error page begins its message with a capital.
		if rec := post(ctype, body); rec.Code != tc.status || !strings.Contains(strings.ToLower(rec.Body.String()), strings.ToLower(tc.says)) {
			t.Errorf("%s: %d %s; want %d saying %q", tc.name, rec.Code, rec.Body, tc.status, tc.says)
		}
	}
	if rec := post("application/x-www-form-urlencoded", "_csrf="+tok[1]); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "multipart/form-data") {
		t.Errorf("a form not multipart: %d %s", rec.Code, rec.Body)
	}
	if entries, _ := os.ReadDir(filepath.Join(jobDir, "results")); len(entries) != 0 {
		t.Errorf("refused uploads left %v", entries)
	}
	// The token in the header, as a script sends it, does as well.
	ctype, body := form([][2]string{{"path", "results"}}, "y.txt", "hi")
	req := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/jobs/%d/files/upload", id), strings.NewReader(body))
	req.Header.Set("Content-Type", ctype)
	req.Header.Set(csrfHeader, tok[1])
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: ts.sessions["alice"]})
	rec := httptest.NewRecorder()
	ts.Handler().ServeHTTP(rec, req)
	if b, err := os.ReadFile(filepath.Join(jobDir, "results", "y.txt")); rec.Code != http.StatusSeeOther || string(b) != "hi" {
		t.Errorf("upload with the token in the header: %d %s; file %q, %v", rec.Code, rec.Body, b, err)
	}
}

// BenchmarkFormUpload uploads a 48 MiB file through the files page's
// form: B/op is what the server allocates for it (issue 36: spooled
// through a parsed multipart form before, streamed to the agent now).
//
//	go test -run '^$' -bench FormUpload -benchtime 5x ./web
func BenchmarkFormUpload(b *testing.B) {
	b.Setenv("TMPDIR", b.TempDir())
	ts, id, _ := filesServer(b, 64<<20)
	const size = 48 << 20
	b.SetBytes(size)
	b.ReportAllocs()
	for i := range b.N {
		rec := httptest.NewRecorder()
		ts.Handler().ServeHTTP(rec, uploadRequest(b, ts, id, fmt.Sprintf("f%d.bin", i), size, nil))
		if rec.Code != http.StatusSeeOther {
			b.Fatalf("upload: %d %s", rec.Code, rec.Body)
		}
	}
}
