package integration

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestJobFiles (issue 36): alice browses, downloads (a folder as a
// .tar.gz) and uploads her job's files and her data path, through the
// agent, which reads and writes them as her Unix account (agent --run-as
// owner); bob, of another team, finds no such job; "..", links out of a
// folder and files her account may not read are refused; an upload over
// the machine's limit is refused with 413 naming it. Then the pages, in
// Chromium, at 1440 and 390 px.
func TestJobFiles(t *testing.T) {
	needRootAccounts(t)
	aliceUnix := unixUser(t, "gpt-alice")
	bobUnix := unixUser(t, "gpt-bob")
	uid, _ := strconv.Atoi(aliceUnix.Uid)
	gid, _ := strconv.Atoi(aliceUnix.Gid)
	bobUID, _ := strconv.Atoi(bobUnix.Uid)

	// The data path: one folder per account, each its own.
	scratch := passableDir(t)
	mine := filepath.Join(scratch, "gpt-alice")
	theirs := filepath.Join(scratch, "gpt-bob")
	for _, d := range []struct {
		dir, file, text string
		uid             int
	}{{mine, "data.csv", "a,b\n1,2\n", uid}, {theirs, "secret.txt", "bob's\n", bobUID}} {
		if err := os.Mkdir(d.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d.dir, d.file), []byte(d.text), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{d.dir, filepath.Join(d.dir, d.file)} {
			if err := os.Chown(p, d.uid, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Symlink("../gpt-bob", filepath.Join(mine, "bobs")); err != nil {
		t.Fatal(err)
	}

	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--max-retries", "0")
	work := passableDir(t)
	startAgent(t, srv.URL, "gpu-files", "--run-as", "owner", "--work-dir", work,
		"--data-path", "scratch="+scratch+"/{user}", "--max-upload", "1KiB", "--max-archive", "1MiB")
	waitGPUs(t, srv.URL, 2)
	adminCLI(t, data, "set-unix-name", "--name", "alice", "--unix-name", "gpt-alice")
	adminCLI(t, data, "set-unix-name", "--name", "bob", "--unix-name", "gpt-bob")
	alice := newAPI(t, srv.URL, "alice", "dev")
	bob := newAPI(t, srv.URL, "bob", "dev")

	id := submit(t, alice, map[string]any{"name": "writes-files", "gpus": 1, "command": []string{"sh", "-c", `set -e
echo hello
mkdir -p "$GPUPORTAL_CHECKPOINT_DIR/step-200"
echo weights > "$GPUPORTAL_CHECKPOINT_DIR/step-200/model.pt"
echo 200 > "$GPUPORTAL_CHECKPOINT_DIR/latest.txt"
mkdir results; echo 0.93 > results/accuracy.txt
ln -s /etc/shadow shadow; ln -s .. up`}})
	if j := alice.waitState(id, 60*time.Second, "succeeded", "failed"); j.State != "succeeded" {
		t.Fatalf("alice's job %s: %q\n%s", j.State, j.Reason, jobLog(t, alice, id))
	}
	jobDir := filepath.Join(work, "jobs", strconv.FormatInt(id, 10))
	// A file of root's in her folder, which her account may not read.
	if err := os.WriteFile(filepath.Join(jobDir, "root-only"), []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files := fmt.Sprintf("/api/v1/jobs/%d/files", id)

	// Browse: her folder and her checkpoints.
	var l struct {
		Node    string   `json:"node"`
		Roots   []string `json:"roots"`
		Entries []struct {
			Name, Type, Target string
			Size               int64
		} `json:"entries"`
		CanUpload bool `json:"can_upload"`
	}
	if st := alice.do(http.MethodGet, files, nil, &l); st != http.StatusOK {
		t.Fatalf("GET %s: %d", files, st)
	}
	var names []string
	for _, e := range l.Entries {
		names = append(names, e.Name+":"+e.Type)
	}
	if got := strings.Join(names, " "); got != "checkpoint:dir results:dir output.log:file root-only:file shadow:link up:link" ||
		l.Node != "gpu-files" || strings.Join(l.Roots, ",") != "job,scratch" || !l.CanUpload {
		t.Errorf("alice's job folder: %s on %s, roots %v, can upload %v", got, l.Node, l.Roots, l.CanUpload)
	}
	if st := alice.do(http.MethodGet, files+"?path=checkpoint", nil, &l); st != http.StatusOK || len(l.Entries) != 2 ||
		l.Entries[0].Name != "step-200" || l.Entries[1].Name != "latest.txt" {
		t.Errorf("checkpoints: %d %+v", st, l.Entries)
	}

	// Download a file, and a folder as an archive.
	if st, body := rawCall(t, alice, http.MethodGet, files+"/content?path=output.log", nil); st != http.StatusOK || body != "hello\n" {
		t.Errorf("output.log: %d %q", st, body)
	}
	st, body := rawCall(t, alice, http.MethodGet, files+"/archive?path=checkpoint", nil)
	if got := untar(t, body); st != http.StatusOK || got["checkpoint/step-200/model.pt"] != "weights\n" || got["checkpoint/latest.txt"] != "200\n" {
		t.Errorf("checkpoint archive: %d %v", st, got)
	}

	// Refused: "..", links out of the folder, what her account may not read.
	for _, tc := range []struct {
		path   string
		status int
		says   string
	}{
		{files + "/content?path=../../../../etc/passwd", 400, `".." is not allowed`},
		{files + "/content?path=shadow", 403, "leads out of the folder"},
		{files + "/content?path=up/" + strconv.FormatInt(id, 10) + "/output.log", 403, "leads out of the folder"},
		{files + "?path=up", 403, "leads out of the folder"},
		{files + "/archive?path=up", 403, "leads out of the folder"},
		{files + "/content?path=root-only", 403, "permission denied to the job's account"},
		{files + "/content?root=scratch&path=../gpt-bob/secret.txt", 400, `".." is not allowed`},
		{files + "/content?root=scratch&path=bobs/secret.txt", 403, "leads out of the folder"},
		{files + "?root=nowhere", 404, `root "nowhere"`},
	} {
		if st, body := rawCall(t, alice, http.MethodGet, tc.path, nil); st != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("GET %s: %d %s; want %d saying %q", tc.path, st, body, tc.status, tc.says)
		}
	}
	// Her data path, as her account.
	if st, body := rawCall(t, alice, http.MethodGet, files+"/content?root=scratch&path=data.csv", nil); st != http.StatusOK || body != "a,b\n1,2\n" {
		t.Errorf("her data path: %d %q", st, body)
	}

	// bob, of another team: no such job, whatever he asks.
	for _, p := range []string{files, files + "/content?path=output.log", files + "/archive", files + "?root=scratch"} {
		if st, body := rawCall(t, bob, http.MethodGet, p, nil); st != http.StatusNotFound || strings.Contains(body, "hello") {
			t.Errorf("bob GET %s: %d %s; want 404", p, st, body)
		}
	}
	if st, _ := rawCall(t, bob, http.MethodPut, files+"/content?path=results/bob.txt", []byte("x")); st != http.StatusNotFound {
		t.Errorf("bob's upload into alice's job: %d, want 404", st)
	}
	if _, err := os.Lstat(filepath.Join(jobDir, "results", "bob.txt")); err == nil {
		t.Error("bob's upload landed in alice's folder")
	}

	// An admin reads her files: each read is in the audit log, with what
	// was read (checkFilesPages looks at it on the admin page).
	admin := newAPI(t, srv.URL, "admin", "dev")
	if st, body := rawCall(t, admin, http.MethodGet, files+"/content?path=output.log", nil); st != http.StatusOK || body != "hello\n" {
		t.Errorf("the admin reads output.log: %d %q", st, body)
	}
	if st, _ := rawCall(t, admin, http.MethodGet, files+"/archive?root=scratch", nil); st != http.StatusOK {
		t.Errorf("the admin archives her data path: %d", st)
	}

	// Upload: written as her account; over the limit, refused naming it.
	if st, body := rawCall(t, alice, http.MethodPut, files+"/content?path=results/notes.txt", []byte("uploaded\n")); st != http.StatusCreated {
		t.Errorf("upload: %d %s", st, body)
	}
	if fi, err := os.Stat(filepath.Join(jobDir, "results", "notes.txt")); err != nil {
		t.Error(err)
	} else if s := fi.Sys().(*syscall.Stat_t); int(s.Uid) != uid || int(s.Gid) != gid {
		t.Errorf("the uploaded file belongs to %d:%d, want alice's account %d:%d", s.Uid, s.Gid, uid, gid)
	}
	st, body = rawCall(t, alice, http.MethodPut, files+"/content?path=results/big.bin", bytes.Repeat([]byte("x"), 2048))
	if st != http.StatusRequestEntityTooLarge || !strings.Contains(body, "2 KiB is over this machine's upload limit of 1 KiB (agent --max-upload)") {
		t.Errorf("upload of 2 KiB: %d %s; want 413 naming the limit", st, body)
	}
	if st, body := rawCall(t, alice, http.MethodPut, files+"/content?path=../../x", []byte("x")); st != http.StatusBadRequest {
		t.Errorf("upload to ../../x: %d %s", st, body)
	}
	if st, body := rawCall(t, alice, http.MethodPut, files+"/content?root=scratch&path=bobs/planted.txt", []byte("x")); st != http.StatusForbidden {
		t.Errorf("upload through a link to bob's folder: %d %s", st, body)
	}
	if _, err := os.Lstat(filepath.Join(theirs, "planted.txt")); err == nil {
		t.Error("alice's upload landed in bob's folder")
	}

	// The command line.
	cl := newCLI(t, srv.URL)
	env := []string{"GPUPORTAL_TOKEN=" + alice.token}
	out := cl.ok(env, "job", "files", strconv.FormatInt(id, 10), "checkpoint")
	if !strings.Contains(out, "step-200/") || !strings.Contains(out, "latest.txt") {
		t.Errorf("job files: %s", out)
	}
	dl := t.TempDir()
	cl.ok(env, "job", "download", strconv.FormatInt(id, 10), "results", "--to", filepath.Join(dl, "results.tar.gz"))
	tgz, err := os.ReadFile(filepath.Join(dl, "results.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if got := untar(t, string(tgz)); got["results/accuracy.txt"] != "0.93\n" || got["results/notes.txt"] != "uploaded\n" {
		t.Errorf("job download of a folder: %v", got)
	}
	src := filepath.Join(dl, "config.yaml")
	if err := os.WriteFile(src, []byte("lr: 0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cl.ok(env, "job", "upload", strconv.FormatInt(id, 10), src, "results/")
	if b, err := os.ReadFile(filepath.Join(jobDir, "results", "config.yaml")); err != nil || string(b) != "lr: 0.1\n" {
		t.Errorf("job upload: %q, %v", b, err)
	}

	checkFilesPages(t, srv.URL, id, jobDir)
}

// checkFilesPages looks at the files page and the job page's checkpoints
// as alice at 1440 and 390 px, and uploads through the page's form.
func checkFilesPages(t *testing.T, base string, id int64, jobDir string) {
	ctx, sc := screensAs(t, base, "alice")
	for _, vp := range viewports {
		for _, s := range []struct {
			name, path, wait string
		}{
			{"job", fmt.Sprintf("/jobs/%d", id), "#job-checkpoints table"},
			{"files", fmt.Sprintf("/jobs/%d/files?root=job&path=checkpoint", id), "#files"},
			{"results", fmt.Sprintf("/jobs/%d/files?root=job&path=results", id), "#files-upload"},
		} {
			sc.visit(t, vp, s.path, s.wait, "files-"+s.name)
		}
	}
	err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", base, id)), chromedp.WaitVisible("#job-checkpoints table"))
	text := ""
	if err == nil {
		text, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#job-checkpoints").innerText`))
	}
	if err != nil || !strings.Contains(text, "step-200") || !strings.Contains(text, "latest.txt") {
		t.Errorf("the job page's checkpoints: %q, %v", text, err)
	}
	// The upload form, with its CSRF token.
	up := filepath.Join(t.TempDir(), "from-browser.txt")
	if err := os.WriteFile(up, []byte("hi from the page\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("%s/jobs/%d/files?root=job&path=results", base, id)),
		chromedp.SetUploadFiles(`#upload-file`, []string{up}),
		chromedp.Submit(`#files-upload`),
		chromedp.WaitVisible(`#file-uploaded`))
	note := ""
	if err == nil {
		note, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#file-uploaded").innerText`))
	}
	if err != nil || !strings.Contains(note, "from-browser.txt") {
		t.Errorf("upload through the page: %q, %v", note, err)
	}
	if b, err := os.ReadFile(filepath.Join(jobDir, "results", "from-browser.txt")); err != nil || string(b) != "hi from the page\n" {
		t.Errorf("the page's upload: %q, %v", b, err)
	}

	// The admin's reads of her files, on the admin page's audit log.
	if err := sc.login("admin"); err != nil {
		t.Fatal(err)
	}
	text = ""
	err = chromedp.Do(ctx, chromedp.EmulateViewport(viewports[0].width, viewports[0].height), chromedp.Navigate(base+"/admin"), chromedp.WaitVisible("#audit"))
	if err == nil {
		text, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#audit").innerText`))
	}
	target := fmt.Sprintf("job %d of alice", id)
	for _, want := range []string{"job.files.read\t" + target + "\tjob:output.log, on gpu-files", "job.files.archive\t" + target + "\tscratch:/, on gpu-files"} {
		if err != nil || !strings.Contains(text, want) {
			t.Errorf("the admin page's audit log has no %q: %v\n%s", want, err, text)
		}
	}
	for _, vp := range viewports {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(vp.width, vp.height), chromedp.Navigate(base+"/admin"), chromedp.WaitVisible("#audit")); err != nil {
			t.Fatal(err)
		}
		screenshot(t, ctx, "files-audit-"+vp.name)
	}
}

// rawCall sends a request as a with body (nil: none) and returns the status
// and body as they came.
func rawCall(t *testing.T, a *api, method, path string, body []byte) (int, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, a.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode >= 400 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return resp.StatusCode, e.Error
		}
	}
	return resp.StatusCode, string(b)
}

// untar reads a .tar.gz's files (and links, as their targets).
func untar(t *testing.T, tgz string) map[string]string {
	t.Helper()
	out := map[string]string{}
	zr, err := gzip.NewReader(strings.NewReader(tgz))
	if err != nil {
		t.Errorf("not gzip: %v", err)
		return out
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Errorf("tar: %v", err)
			return out
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b) + h.Linkname
	}
}

// TestJobFilesOfEachMachine: a job of two GPUs on two machines of one
// each has a job folder on both, each part writing its own. Its files are
// read, downloaded and uploaded on either machine by naming it (API
// ?node=, the command line's --node, the files page's machine links and
// its upload form), the first machine (rank 0) by default; a machine the
// job did not run on is refused naming those it did; another team finds
// no such job on either.
func TestJobFilesOfEachMachine(t *testing.T) {
	needRootAccounts(t)
	unixUser(t, "gpt-alice")
	data := t.TempDir()
	srv := startAgentServer(t, "--data", data, "--max-retries", "0")
	work, agents := map[string]string{}, map[string]*server{}
	for _, name := range []string{"fm-a", "fm-b"} {
		work[name] = passableDir(t)
		agents[name] = startAgent(t, srv.URL, name, "--gpus", "sim:1x1x80", "--run-as", "owner", "--work-dir", work[name])
	}
	waitGPUs(t, srv.URL, 2)
	adminCLI(t, data, "set-unix-name", "--name", "alice", "--unix-name", "gpt-alice")
	alice := newAPI(t, srv.URL, "alice", "dev")
	bob := newAPI(t, srv.URL, "bob", "dev")

	id := submit(t, alice, map[string]any{"name": "ddp-files", "gpus": 2, "command": []string{"sh", "-c",
		`set -e; mkdir results; echo "rank $NODE_RANK on $(hostname)" > results/rank.txt; echo "part $NODE_RANK"`}})
	j := alice.waitState(id, 60*time.Second, "succeeded", "failed")
	if j.State != "succeeded" {
		t.Fatalf("job %s: %q", j.State, j.Reason)
	}
	first, second := strings.Split(j.Placement[0], ":")[0], strings.Split(j.Placement[1], ":")[0]
	if first == second {
		t.Fatalf("placement %v: want one GPU on each machine", j.Placement)
	}
	files := fmt.Sprintf("/api/v1/jobs/%d/files", id)

	var l struct {
		Node  string   `json:"node"`
		Nodes []string `json:"nodes"`
	}
	for _, tc := range []struct{ query, node string }{{"", first}, {"?node=" + second, second}, {"?node=" + first + "&path=results", first}} {
		if st := alice.do(http.MethodGet, files+tc.query, nil, &l); st != http.StatusOK || l.Node != tc.node || strings.Join(l.Nodes, ",") != first+","+second {
			t.Errorf("GET %s: %d, on %s of %v; want %s of [%s %s]", files+tc.query, st, l.Node, l.Nodes, tc.node, first, second)
		}
	}
	for _, tc := range []struct {
		path   string
		status int
		says   string
	}{
		{files + "/content?path=results/rank.txt", 200, "rank 0 on"},
		{files + "/content?path=results/rank.txt&node=" + second, 200, "rank 1 on"},
		{files + "/content?path=output.log&node=" + second, 200, "part 1"},
		{files + "/archive?path=results&node=" + second, 200, ""},
		{files + "/content?path=output.log&node=fm-c", 400, fmt.Sprintf(`node: job %d runs (or ran last) on %s, %s, not "fm-c"`, id, first, second)},
		{files + "?node=../fm-a", 400, "node: job"},
	} {
		st, body := rawCall(t, alice, http.MethodGet, tc.path, nil)
		if strings.Contains(tc.path, "/archive") && st == 200 {
			body = untar(t, body)["results/rank.txt"]
			tc.says = "rank 1 on"
		}
		if st != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("GET %s: %d %q; want %d with %q", tc.path, st, body, tc.status, tc.says)
		}
	}
	for _, p := range []string{files + "?node=" + second, files + "/content?path=output.log&node=" + second} {
		if st, body := rawCall(t, bob, http.MethodGet, p, nil); st != http.StatusNotFound || strings.Contains(body, "part 1") {
			t.Errorf("bob GET %s: %d %s; want 404", p, st, body)
		}
	}
	if st, body := rawCall(t, alice, http.MethodPut, files+"/content?path=results/api.txt&node="+second, []byte("to rank 1\n")); st != http.StatusCreated {
		t.Errorf("upload to %s: %d %s", second, st, body)
	}
	dirOn := func(node string) string { return filepath.Join(work[node], "jobs", strconv.FormatInt(id, 10)) }
	if b, err := os.ReadFile(filepath.Join(dirOn(second), "results", "api.txt")); err != nil || string(b) != "to rank 1\n" {
		t.Errorf("the upload on %s: %q, %v", second, b, err)
	}
	if _, err := os.Stat(filepath.Join(dirOn(first), "results", "api.txt")); err == nil {
		t.Errorf("the upload to %s landed on %s too", second, first)
	}

	// The command line.
	cl := newCLI(t, srv.URL)
	env := []string{"GPUPORTAL_TOKEN=" + alice.token}
	sid := strconv.FormatInt(id, 10)
	if out := cl.ok(env, "job", "files", sid, "results", "--node", second); !strings.Contains(out, "on "+second) || !strings.Contains(out, "api.txt") ||
		!strings.Contains(out, "the job ran on "+first+", "+second) {
		t.Errorf("job files --node %s:\n%s", second, out)
	}
	if out := cl.ok(env, "job", "download", sid, "results/rank.txt", "--node", second, "--to", "-"); !strings.HasPrefix(out, "rank 1 on") {
		t.Errorf("job download --node %s: %q", second, out)
	}
	src := filepath.Join(t.TempDir(), "cli.txt")
	if err := os.WriteFile(src, []byte("from the cli\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := cl.ok(env, "job", "upload", sid, src, "results/", "--node", second); !strings.Contains(out, "on "+second) {
		t.Errorf("job upload --node: %q", out)
	}
	if b, err := os.ReadFile(filepath.Join(dirOn(second), "results", "cli.txt")); err != nil || string(b) != "from the cli\n" {
		t.Errorf("the command line's upload on %s: %q, %v", second, b, err)
	}
	if out, errOut, code := cl.run(env, "job", "files", sid, "--node", "fm-c"); code == 0 || !strings.Contains(errOut, "not \"fm-c\"") {
		t.Errorf("job files --node fm-c: exit %d, %q %q; want an error naming the machines", code, out, errOut)
	}

	// The page: the machines' links, and the upload form onto the one shown.
	ctx, sc := screensAs(t, srv.URL, "alice")
	for _, vp := range viewports {
		sc.visit(t, vp, fmt.Sprintf("/jobs/%d/files?root=job&path=results", id), "#file-machines", "files-machines")
	}
	err := chromedp.Do(ctx, chromedp.Click(fmt.Sprintf(`#file-machines a[href*="node=%s"]`, second)),
		chromedp.WaitVisible(fmt.Sprintf(`#file-machines a[aria-current="page"][href*="node=%s"]`, second)))
	var rows string
	if err == nil {
		rows, err = textOf(ctx, "#files")
	}
	if err != nil || !strings.Contains(rows, "cli.txt") {
		t.Fatalf("the files page on %s after its link: %q, %v", second, rows, err)
	}
	up := filepath.Join(t.TempDir(), "from-page.txt")
	if err := os.WriteFile(up, []byte("page to rank 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	note := ""
	err = chromedp.Do(ctx, chromedp.SetUploadFiles(`#upload-file`, []string{up}), chromedp.Submit(`#files-upload`), chromedp.WaitVisible(`#file-uploaded`))
	if err == nil {
		note, err = textOf(ctx, "#file-machines")
	}
	if err != nil || !strings.Contains(note, second) {
		t.Errorf("after the page's upload: %q, %v", note, err)
	}
	if b, err := os.ReadFile(filepath.Join(dirOn(second), "results", "from-page.txt")); err != nil || string(b) != "page to rank 1\n" {
		t.Errorf("the page's upload on %s: %q, %v", second, b, err)
	}
	if _, err := os.Stat(filepath.Join(dirOn(first), "results", "from-page.txt")); err == nil {
		t.Errorf("the page's upload onto %s landed on %s", second, first)
	}
	if cur, err := textOf(ctx, `#file-machines a[aria-current="page"]`); err != nil || cur != second {
		t.Errorf("the page after the upload shows %q (%v), want %s", cur, err, second)
	}

	// The second machine's agent killed: its files are out of reach, said
	// so (503 naming it); the first machine's are read as before.
	agents[second].kill()
	eventually(t, 30*time.Second, "the files on "+second+" to be out of reach", func() bool {
		st, body := rawCall(t, alice, http.MethodGet, files+"?node="+second, nil)
		return st == http.StatusServiceUnavailable && strings.Contains(body, "on machine "+second+", which is not connected")
	})
	if st, body := rawCall(t, alice, http.MethodGet, files+"/content?path=results/rank.txt", nil); st != http.StatusOK || !strings.HasPrefix(body, "rank 0 on") {
		t.Errorf("the first machine's file with the second's agent gone: %d %q", st, body)
	}
}
