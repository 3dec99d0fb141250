package job

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// MaxImageLen is the longest container image reference a job may name.
const MaxImageLen = 512

// imageRe is a container image reference as OCI tools read it:
// [registry[:port]/]path[:tag][@digest], the path in lower case. It
// never starts with '-', so it cannot be taken for an option. It is
// compiled on first use: its bounded repeats make a program of about 100
// kB, which every command of the binary would otherwise build at start-up.
var imageRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^` +
		// registry host and port, or a first path component
		`(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/)?` +
		// path components
		`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
		// tag and digest
		`(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$`)
})

// CheckImage checks that image reads as a container image reference
// (registry.lab/team/pytorch:2.3, localhost/train@sha256:...); the
// error says what is wrong.
func CheckImage(image string) error {
	switch {
	case image == "":
		return errors.New("is empty")
	case len(image) > MaxImageLen:
		return fmt.Errorf("is longer than %d characters", MaxImageLen)
	case strings.TrimSpace(image) != image:
		return errors.New("begins or ends with white space: remove it")
	case !imageRe().MatchString(image):
		return fmt.Errorf("%q is not an image reference such as registry.lab/team/pytorch:2.3 (lower-case path, optional :tag and @digest)", image)
	}
	return nil
}

// ImagePrefixes are the prefixes of the images jobs may name (serve
// --allowed-images); empty allows every image. A prefix without '/'
// names a registry and gets one: "registry.lab" allows
// "registry.lab/anything", not "registry.lab.example.com/x".
type ImagePrefixes []string

// ParseImagePrefixes reads a comma-separated list of prefixes such as
// "localhost/,registry.lab/".
func ParseImagePrefixes(list string) (ImagePrefixes, error) {
	var out ImagePrefixes
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if strings.ContainsAny(p, " \t\n@") || strings.HasPrefix(p, "-") {
			return nil, fmt.Errorf("%q is not an image prefix such as localhost/ or registry.lab/team/", p)
		}
		if !strings.Contains(p, "/") {
			p += "/"
		}
		out = append(out, p)
	}
	return out, nil
}

// Allows reports whether image starts with one of the prefixes (any
// image when there are none).
func (ps ImagePrefixes) Allows(image string) bool {
	if len(ps) == 0 {
		return true
	}
	for _, p := range ps {
		if strings.HasPrefix(image, p) {
			return true
		}
	}
	return false
}

// Refusal says why image is not allowed, naming the prefixes that are.
func (ps ImagePrefixes) Refusal(image string) string {
	return fmt.Sprintf("%q is not allowed here: images must start with %s", image, strings.Join(ps, " or "))
}
