package filehttp

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gpuportal/gpuportal/core/jobfiles"
)

// restore replaces folder p of root with the folder a .tar.gz holds, as
// archive writes it: one top folder (its name is not read), with files,
// folders and links below it, their write times kept. The archive is
// unpacked beside p first and swapped in once whole, so that a broken
// upload leaves p as it was. The agent restores the server's copy of a
// job's checkpoint folder so (job/checkpoint.go).
func (s *Server) restore(w http.ResponseWriter, r *http.Request) {
	root, name, p, err := s.open(r)
	if err != nil {
		refuse(w, err)
		return
	}
	defer root.Close()
	if p == "." {
		refuse(w, &jobfiles.Error{Kind: jobfiles.Invalid, Msg: "path: name the folder to restore"})
		return
	}
	if fi, err := root.Lstat(p); err == nil && !fi.IsDir() {
		refuse(w, &jobfiles.Error{Kind: jobfiles.Invalid, Msg: jobfiles.Where(name, p) + ": exists and is not a folder"})
		return
	}
	dir, base := path.Split(p)
	if dir == "" {
		dir = "."
	}
	if err := root.MkdirAll(dir, 0o700); err != nil {
		refuse(w, jobfiles.FSError(name, dir, err))
		return
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	tmp := path.Join(dir, "."+base+".restore-"+hex.EncodeToString(b))
	if err := root.Mkdir(tmp, 0o700); err != nil {
		refuse(w, jobfiles.FSError(name, dir, err))
		return
	}
	sum, err := unpack(root, tmp, r.Body, s.Limits.WithDefaults().MaxArchive)
	if err == nil {
		err = swapIn(root, tmp, p, hex.EncodeToString(b))
	}
	if err != nil {
		_ = root.RemoveAll(tmp)
		var je *jobfiles.Error
		if !errors.As(err, &je) {
			err = jobfiles.FSError(name, p, err)
		}
		refuse(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, sum)
}

// Restored is what a restore wrote.
type Restored struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// unpack writes the archive in body to folder dir of root, the archive's
// top folder left out, at most limit bytes of files.
func unpack(root *os.Root, dir string, body io.Reader, limit int64) (Restored, error) {
	var sum Restored
	zr, err := gzip.NewReader(body)
	if err != nil {
		return sum, &jobfiles.Error{Kind: jobfiles.Invalid, Msg: "archive: not gzip: " + err.Error()}
	}
	type dated struct {
		name string
		at   time.Time
	}
	var folders []dated
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sum, &jobfiles.Error{Kind: jobfiles.Invalid, Msg: "archive: " + err.Error()}
		}
		_, rest, _ := strings.Cut(strings.TrimPrefix(hdr.Name, "/"), "/")
		rel, err := jobfiles.CleanPath(rest)
		if err != nil {
			return sum, &jobfiles.Error{Kind: jobfiles.Invalid, Msg: fmt.Sprintf("archive: entry %q: %v", hdr.Name, err)}
		}
		target := path.Join(dir, rel)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(target, 0o700); err != nil {
				return sum, err
			}
			if rel != "." {
				folders = append(folders, dated{target, hdr.ModTime})
			}
		case tar.TypeReg:
			if rel == "." {
				return sum, &jobfiles.Error{Kind: jobfiles.Invalid, Msg: fmt.Sprintf("archive: entry %q: a file where the folder should be", hdr.Name)}
			}
			if sum.Bytes += hdr.Size; sum.Bytes > limit {
				return sum, &jobfiles.Error{Kind: jobfiles.TooLarge, Msg: fmt.Sprintf("archive: holds more than %s of files, this machine's archive limit (agent --max-archive)", jobfiles.FormatBytes(limit))}
			}
			if err := writeEntry(root, target, hdr, tr); err != nil {
				return sum, err
			}
			sum.Files++
		case tar.TypeSymlink:
			if rel == "." {
				continue
			}
			if err := root.MkdirAll(path.Dir(target), 0o700); err != nil {
				return sum, err
			}
			if err := root.Symlink(hdr.Linkname, target); err != nil {
				return sum, err
			}
		}
	}
	// Folders last, deepest first: writing into a folder dates it.
	slices.Reverse(folders)
	for _, f := range folders {
		_ = root.Chtimes(f.name, f.at, f.at)
	}
	return sum, nil
}

// writeEntry writes one file of an archive, dated as the archive says.
func writeEntry(root *os.Root, target string, hdr *tar.Header, body io.Reader) error {
	if err := root.MkdirAll(path.Dir(target), 0o700); err != nil {
		return err
	}
	f, err := root.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fs.FileMode(hdr.Mode)&0o777|0o600)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, body, hdr.Size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return root.Chtimes(target, hdr.ModTime, hdr.ModTime)
}

// swapIn puts folder tmp in the place of p: p, if any, is moved aside
// and removed once tmp has its place.
func swapIn(root *os.Root, tmp, p, suffix string) error {
	dir, base := path.Split(p)
	if dir == "" {
		dir = "."
	}
	old := path.Join(dir, "."+base+".old-"+suffix)
	moved := true
	if err := root.Rename(p, old); errors.Is(err, fs.ErrNotExist) {
		moved = false
	} else if err != nil {
		return err
	}
	if err := root.Rename(tmp, p); err != nil {
		if moved {
			_ = root.Rename(old, p)
		}
		return err
	}
	if moved {
		_ = root.RemoveAll(old)
	}
	return nil
}

// Restore replaces folder p of root with the folder of the .tar.gz body
// (an Archive's answer, as the server copied it).
func (c *Client) Restore(ctx context.Context, root, p string, body io.Reader) (Restored, error) {
	var sum Restored
	resp, err := c.do(ctx, http.MethodPut, fileURL("archive", root, p), body, -1)
	if err != nil {
		return sum, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&sum); err != nil {
		return sum, fmt.Errorf("restore %s: read the answer: %w", jobfiles.Where(root, p), err)
	}
	return sum, nil
}
