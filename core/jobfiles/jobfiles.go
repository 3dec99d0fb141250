// Package jobfiles serves a job's files to the portal (docs/files.md):
// listing a folder, reading a file, a folder as a .tar.gz archive, and
// writing an uploaded file, each inside one of a few named folders (the
// job's own folder, the data paths the agent allows) and never outside.
//
// The agent serves them (Server) as the job's Unix account, in a helper
// process that runs as it when the agent switches users, so that the
// kernel checks every access as it would the job's own; the server asks
// (Client) over a connection the agent opens for it, speaking HTTP/1.1:
//
//	GET /list?root=R&path=P     a folder's entries (Listing, JSON)
//	GET /file?root=R&path=P     a regular file's bytes
//	GET /archive?root=R&path=P  a folder as a gzip-compressed tar stream
//	PUT /file?root=R&path=P     writes the body to the file P (Entry, JSON)
//
// Refusals are JSON {"kind": ..., "error": ...} with a status that says
// the kind (errors.go).
//
// Confinement: every path is relative to its root, has no ".." element
// (refused, not cleaned away), and is opened through an os.Root, so that
// no link leads out of the root; the server follows no link it lists and
// opens nothing but regular files and folders.
package jobfiles

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// JobRoot names the job's own folder among the roots (WORK/jobs/ID on
// the machine that ran it).
const JobRoot = "job"

// CheckpointDir is the checkpoint folder inside the job's folder.
const CheckpointDir = "checkpoint"

// Default limits (agent --max-upload, --max-archive).
const (
	DefaultMaxUpload  int64 = 1 << 30
	DefaultMaxArchive int64 = 4 << 30
	// MaxEntries is the most entries a listing returns; a folder with
	// more says so (Listing.Truncated).
	MaxEntries = 5000
)

// Limits bound what one request moves.
type Limits struct {
	// MaxUpload is the largest file an upload may write, in bytes.
	MaxUpload int64 `json:"max_upload_bytes"`
	// MaxArchive is the most bytes of files a folder's archive may hold
	// (before compression).
	MaxArchive int64 `json:"max_archive_bytes"`
}

// WithDefaults fills the limits left at 0.
func (l Limits) WithDefaults() Limits {
	if l.MaxUpload <= 0 {
		l.MaxUpload = DefaultMaxUpload
	}
	if l.MaxArchive <= 0 {
		l.MaxArchive = DefaultMaxArchive
	}
	return l
}

// Root is a named folder files are served from.
type Root struct {
	Name string
	Dir  string
}

// Entry is one item of a folder.
type Entry struct {
	Name string `json:"name"`
	// Type is "file", "dir", "link" (never followed; Target says where
	// it points) or "other" (a device, a FIFO, a socket: never opened).
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	Target  string    `json:"target,omitempty"`
}

// Entry types.
const (
	TypeFile  = "file"
	TypeDir   = "dir"
	TypeLink  = "link"
	TypeOther = "other"
)

// Listing is a folder's entries: folders first, then by name.
type Listing struct {
	Root string `json:"root"`
	// Path is the folder's path in its root, "." for the root itself.
	Path string `json:"path"`
	// Roots are every root the job's files may be read in.
	Roots     []string `json:"roots"`
	Entries   []Entry  `json:"entries"`
	Truncated bool     `json:"truncated,omitempty"`
	Limits    Limits   `json:"limits"`
}

// CleanPath checks a path a user gave inside a root and returns it in the
// form os.Root and io/fs take: "." for the root, else slash-separated
// names without "." or empty elements. A leading "/" is the root's. Any
// ".." is refused, as are NUL bytes and names longer than 255 bytes.
func CleanPath(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", &Error{Kind: Invalid, Msg: "path: contains a NUL byte"}
	}
	if len(p) > 4096 {
		return "", &Error{Kind: Invalid, Msg: "path: longer than 4096 bytes"}
	}
	var parts []string
	for _, el := range strings.Split(p, "/") {
		switch el {
		case "", ".":
			continue
		case "..":
			return "", &Error{Kind: Invalid, Msg: fmt.Sprintf("path %q: \"..\" is not allowed: paths stay inside their folder", p)}
		}
		if len(el) > 255 {
			return "", &Error{Kind: Invalid, Msg: fmt.Sprintf("path %q: a name longer than 255 bytes", p)}
		}
		parts = append(parts, el)
	}
	if len(parts) == 0 {
		return ".", nil
	}
	return strings.Join(parts, "/"), nil
}

// FormatBytes writes n bytes for people: "512 B", "1.5 KiB", "2 GiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	s := fmt.Sprintf("%.1f", float64(n)/float64(div))
	s = strings.TrimSuffix(s, ".0")
	return s + " " + string("KMGTPE"[exp]) + "iB"
}

// ParseSize reads a size as flags take it: bytes ("1048576"), or a
// number with KiB, MiB, GiB or TiB ("512MiB", "1.5GiB"); it must be 1
// byte or more.
func ParseSize(s string) (int64, error) {
	num, mult := s, 1.0
	for i, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if n, ok := strings.CutSuffix(s, u); ok {
			num, mult = strings.TrimSpace(n), float64(int64(1)<<(10*(i+1)))
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f*mult < 1 || f*mult > 1<<62 {
		return 0, fmt.Errorf("%q: want a size such as 1048576, 512MiB or 2GiB", s)
	}
	return int64(f * mult), nil
}

// Files are one job's files on the machine that holds them, as the
// portal reaches them (filehttp.Client, through the machine's agent).
type Files interface {
	// List returns the entries of folder p of root.
	List(ctx context.Context, root, p string) (*Listing, error)
	// Open starts the download of file p of root.
	Open(ctx context.Context, root, p string) (*Download, error)
	// Archive starts the download of folder p of root as a .tar.gz.
	Archive(ctx context.Context, root, p string) (*Download, error)
	// Put writes body to file p of root: size bytes, or -1 when not
	// known (counted against the limit as they come).
	Put(ctx context.Context, root, p string, size int64, body io.Reader) (*Entry, error)
}

// Download is a file or an archive on its way.
type Download struct {
	Body io.ReadCloser
	// Size is the length of Body; -1 when not known (an archive).
	Size    int64
	ModTime time.Time
}
