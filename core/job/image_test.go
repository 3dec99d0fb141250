package job

import (
	"strings"
	"testing"
)

func TestCheckImage(t *testing.T) {
	tests := []struct {
		image string
		ok    bool
	}{
		{"busybox", true},
		{"localhost/gpuportal-test-busybox:1", true},
		{"registry.lab:5000/team/pytorch:2.3-cuda12", true},
		{"registry.lab/team/train@sha256:" + strings.Repeat("ab", 32), true},
		{"ghcr.io/org/img:v1@sha256:" + strings.Repeat("0", 64), true},
		{"", false},
		{"-v /:/host", false},
		{"--privileged", false},
		{"Registry.lab/Team/Img", false}, // upper-case path
		{"img:tag with space", false},
		{" localhost/x", false},
		{"localhost/x;rm -rf /", false},
		{"localhost//x", false},
		{strings.Repeat("a", MaxImageLen+1), false},
	}
	for _, tc := range tests {
		err := CheckImage(tc.image)
		if (err == nil) != tc.ok {
			t.Errorf("CheckImage(%q) = %v, want ok %v", tc.image, err, tc.ok)
		}
	}
}

func TestImagePrefixes(t *testing.T) {
	ps, err := ParseImagePrefixes(" localhost/, registry.lab ,registry.lab/team/")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		image string
		ok    bool
	}{
		{"localhost/train:1", true},
		{"registry.lab/x/y:2", true},
		{"registry.lab.evil.example/x:1", false}, // a registry prefix ends at its '/'
		{"docker.io/library/busybox", false},
		{"busybox", false},
	}
	for _, tc := range tests {
		if got := ps.Allows(tc.image); got != tc.ok {
			t.Errorf("Allows(%q) = %v, want %v (prefixes %q)", tc.image, got, tc.ok, ps)
		}
	}
	if !(ImagePrefixes(nil)).Allows("anything/at:all") {
		t.Error("no prefixes must allow every image")
	}
	if msg := ps.Refusal("busybox"); !strings.Contains(msg, "localhost/") || !strings.Contains(msg, `"busybox"`) {
		t.Errorf("refusal %q names neither the image nor the prefixes", msg)
	}
	for _, bad := range []string{"-x/", "a b/", "reg/x@sha"} {
		if _, err := ParseImagePrefixes(bad); err == nil {
			t.Errorf("ParseImagePrefixes(%q) accepted", bad)
		}
	}
}
