package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuportal/gpuportal/core/engine"
	"github.com/gpuportal/gpuportal/core/jobfiles"
	"github.com/gpuportal/gpuportal/core/jobfiles/filehttp"
)

// filesNode is machine gpu1 serving every job's folder under dir, and a
// data path, as jobfiles does on an agent.
type testFilesNode struct {
	engine.Node
	dir, data string
	accounts  []string // the accounts it was asked to serve as
}

func (n *testFilesNode) Name() string { return "gpu1" }
func (n *testFilesNode) JobFiles(id int64, account string) jobfiles.Files {
	n.accounts = append(n.accounts, account)
	s := &filehttp.Server{Roots: []jobfiles.Root{
		{Name: jobfiles.JobRoot, Dir: filepath.Join(n.dir, "jobs", strconv.FormatInt(id, 10))},
		{Name: "scratch", Dir: n.data},
	}, Limits: jobfiles.Limits{MaxUpload: 8}}
	return filehttp.NewClient(func(context.Context) (net.Conn, error) {
		a, b := net.Pipe()
		go func() { _ = filehttp.ServeConn(context.Background(), s, b) }()
		return a, nil
	})
}

type filesEngine struct {
	fakeEngine
	node *testFilesNode
}

func (e *filesEngine) Nodes() []engine.Node { return []engine.Node{e.node} }

// TestJobFilesAuthorization: alice's job's folder is read by whoever sees
// the job; her data path and uploads are hers and admins'; another team
// finds no such job. Every read and write goes as her Unix account.
func TestJobFilesAuthorization(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	node := &testFilesNode{dir: t.TempDir(), data: t.TempDir()}
	f.app.cfg.Engine = &filesEngine{node: node}
	if err := f.store.SetUnixName(ctx, "alice", "alice_unix"); err != nil {
		t.Fatal(err)
	}
	id := f.job(t, true)
	jobDir := filepath.Join(node.dir, "jobs", strconv.FormatInt(id, 10))
	if err := os.MkdirAll(filepath.Join(jobDir, "checkpoint"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jobDir, "checkpoint", "step-1"), []byte("w"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{ // actor -> action -> outcome
		"alice":      {"list": "ok", "checkpoints": "ok", "data": "ok", "upload": "ok"},
		"carol":      {"list": "ok", "checkpoints": "ok", "data": "forbidden", "upload": "forbidden"},
		"visionlead": {"list": "ok", "checkpoints": "ok", "data": "forbidden", "upload": "forbidden"},
		"bob":        {"list": "not found", "checkpoints": "not found", "data": "not found", "upload": "not found"},
		"admin":      {"list": "ok", "checkpoints": "ok", "data": "ok", "upload": "ok"},
	}
	for who, byAction := range want {
		a := Actor{User: f.users[who]}
		got := map[string]error{}
		_, got["list"] = f.app.JobFiles(ctx, a, id, FileRequest{})
		_, got["checkpoints"] = f.app.JobCheckpoints(ctx, a, id)
		_, got["data"] = f.app.JobFiles(ctx, a, id, FileRequest{Root: "scratch"})
		_, got["upload"] = f.app.UploadJobFile(ctx, a, id, FileRequest{Path: "in-" + who}, 2, strings.NewReader("hi"))
		for act, w := range byAction {
			if outcome(got[act]) != w {
				t.Errorf("%s %s: %v, want %s", who, act, got[act], w)
			}
		}
	}
	for _, acc := range node.accounts {
		if acc != "alice_unix" {
			t.Errorf("served as %q, want alice's Unix account", acc)
		}
	}
	a := Actor{User: f.users["alice"]}
	l, err := f.app.JobCheckpoints(ctx, a, id)
	if err != nil || l == nil || len(l.Entries) != 1 || l.Entries[0].Name != "step-1" || !l.CanUpload {
		t.Errorf("checkpoints: %+v, %v", l, err)
	}
	if l, _ := f.app.JobFiles(ctx, Actor{User: f.users["carol"]}, id, FileRequest{}); l == nil || strings.Join(l.Roots, ",") != "job" || l.CanUpload {
		t.Errorf("carol's listing %+v: want only the job's folder, no upload", l)
	}
	for _, tc := range []struct {
		req  FileRequest
		kind string
	}{
		{FileRequest{Path: "../x"}, "invalid"},
		{FileRequest{Path: "nope"}, "not found"},
	} {
		if _, err := f.app.OpenJobFile(ctx, a, id, tc.req); outcome(err) != tc.kind {
			t.Errorf("open %+v: %v, want %s", tc.req, err, tc.kind)
		}
	}
	_, err = f.app.UploadJobFile(ctx, a, id, FileRequest{Path: "big"}, 9, strings.NewReader("123456789"))
	if KindOf(err) != TooLarge || !strings.Contains(err.Error(), "upload limit of 8 B") {
		t.Errorf("upload over the limit: %v", err)
	}
	d, err := f.app.ArchiveJobFiles(ctx, a, id, FileRequest{Path: "checkpoint"})
	if err != nil || d.Name != "checkpoint.tar.gz" {
		t.Fatalf("archive: %+v, %v", d, err)
	}
	b, _ := io.ReadAll(d.Body)
	d.Body.Close()
	if len(b) < 20 {
		t.Errorf("archive of %d bytes", len(b))
	}
	// A job that never ran has no files.
	fresh := f.job(t, false)
	if _, err := f.app.JobFiles(ctx, a, fresh, FileRequest{}); KindOf(err) != Conflict {
		t.Errorf("files of a job that never ran: %v, want conflict", err)
	}
	if l, err := f.app.JobCheckpoints(ctx, a, fresh); l != nil || err != nil {
		t.Errorf("checkpoints of a job that never ran: %+v, %v; want none", l, err)
	}
	var audited int
	entries, _ := f.store.AuditLog(ctx, 100)
	for _, e := range entries {
		if e.Action == "job.files.upload" {
			audited++
		}
	}
	if audited != 2 {
		t.Errorf("%d uploads in the audit log, want alice's and the admin's", audited)
	}
}

// TestJobFilesReadsAudited: whoever reads alice's job's files and is not
// alice (an admin, a teammate) is in the audit log, with what they read;
// alice's own reads are not, nor are listings of the job's folder, which
// her team sees as it sees her job's output.
func TestJobFilesReadsAudited(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	node := &testFilesNode{dir: t.TempDir(), data: t.TempDir()}
	f.app.cfg.Engine = &filesEngine{node: node}
	id := f.job(t, true)
	jobDir := filepath.Join(node.dir, "jobs", strconv.FormatInt(id, 10))
	if err := os.MkdirAll(filepath.Join(jobDir, "checkpoint"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(jobDir, "output.log"), filepath.Join(node.data, "data.csv")} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(who string) {
		t.Helper()
		a := Actor{User: f.users[who], From: "192.0.2.7"}
		for _, req := range []FileRequest{{Path: "output.log"}, {Root: "scratch", Path: "data.csv"}} {
			d, err := f.app.OpenJobFile(ctx, a, id, req)
			if err != nil {
				if who == "carol" && req.Root == "scratch" {
					continue // not hers to read
				}
				t.Fatalf("%s reads %+v: %v", who, req, err)
			}
			d.Body.Close()
		}
		if d, err := f.app.ArchiveJobFiles(ctx, a, id, FileRequest{Path: "checkpoint"}); err != nil {
			t.Fatalf("%s archives: %v", who, err)
		} else {
			d.Body.Close()
		}
		_, _ = f.app.JobFiles(ctx, a, id, FileRequest{})
		_, _ = f.app.JobFiles(ctx, a, id, FileRequest{Root: "scratch"})
	}
	for _, who := range []string{"alice", "admin", "carol"} {
		read(who)
	}
	entries, err := f.store.AuditLog(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if strings.HasPrefix(e.Action, "job.files.") {
			got = append(got, e.Actor+" "+e.Action+" "+e.Target+" "+e.Detail+" from "+e.From)
		}
	}
	slices.Sort(got)
	target := fmt.Sprintf("job %d of alice", id)
	want := []string{
		"admin job.files.archive " + target + " job:checkpoint, on gpu1 from 192.0.2.7",
		"admin job.files.list " + target + " scratch:/, on gpu1 from 192.0.2.7",
		"admin job.files.read " + target + " job:output.log, on gpu1 from 192.0.2.7",
		"admin job.files.read " + target + " scratch:data.csv, on gpu1 from 192.0.2.7",
		"carol job.files.archive " + target + " job:checkpoint, on gpu1 from 192.0.2.7",
		"carol job.files.read " + target + " job:output.log, on gpu1 from 192.0.2.7",
	}
	if !slices.Equal(got, want) {
		t.Errorf("audit log of the reads:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
