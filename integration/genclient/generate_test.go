package genclient

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestGeneratedClientIsCurrent regenerates the client from
// web/openapi.json with the oapi-codegen that go.mod pins, and fails when
// client.gen.go differs: the committed client cannot drift from the
// document.
func TestGeneratedClientIsCurrent(t *testing.T) {
	cfg, err := os.ReadFile("oapi-codegen.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "client.gen.go")
	cfg = regexp.MustCompile(`(?m)^output: .*$`).ReplaceAll(cfg, []byte("output: "+out))
	if err := os.WriteFile(filepath.Join(dir, "oapi-codegen.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	gen := exec.Command("go", "tool", "oapi-codegen", "-config", filepath.Join(dir, "oapi-codegen.yaml"), "../../web/openapi.json")
	if msg, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("go tool oapi-codegen: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatalf("integration/genclient/client.gen.go is stale (%d bytes; regenerated: %d): run go generate ./integration/genclient and commit it", len(have), len(want))
	}
}
