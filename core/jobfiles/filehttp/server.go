package filehttp

import (
	"archive/tar"
	"compress/gzip"
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
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuportal/gpuportal/core/jobfiles"
)

// Server serves one job's files from its roots, as whatever account runs
// it: the agent starts it as the job's (helper.go).
type Server struct {
	Roots  []jobfiles.Root
	Limits jobfiles.Limits
}

// Handler is the server's HTTP handler (the protocol in the package's
// documentation).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /list", s.list)
	mux.HandleFunc("GET /file", s.read)
	mux.HandleFunc("GET /archive", s.archive)
	mux.HandleFunc("PUT /file", s.write)
	mux.HandleFunc("PUT /archive", s.restore)
	return mux
}

// open opens the root and checks the path a request names.
func (s *Server) open(r *http.Request) (*os.Root, string, string, error) {
	name := r.URL.Query().Get("root")
	if name == "" {
		name = jobfiles.JobRoot
	}
	i := slices.IndexFunc(s.Roots, func(rt jobfiles.Root) bool { return rt.Name == name })
	if i < 0 {
		return nil, "", "", &jobfiles.Error{Kind: jobfiles.NotFound, Msg: fmt.Sprintf("root %q: no such folder on this machine (there are: %s)", name, strings.Join(s.rootNames(), ", "))}
	}
	p, err := jobfiles.CleanPath(r.URL.Query().Get("path"))
	if err != nil {
		return nil, "", "", err
	}
	root, err := os.OpenRoot(s.Roots[i].Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if name == jobfiles.JobRoot {
				return nil, "", "", &jobfiles.Error{Kind: jobfiles.NotFound, Msg: "the job has no folder on this machine (removed, or the job never started here)"}
			}
			return nil, "", "", &jobfiles.Error{Kind: jobfiles.NotFound, Msg: fmt.Sprintf("root %q: its folder does not exist on this machine", name)}
		}
		return nil, "", "", jobfiles.FSError(name, ".", err)
	}
	return root, name, p, nil
}

func (s *Server) rootNames() []string {
	names := make([]string, len(s.Roots))
	for i, r := range s.Roots {
		names[i] = r.Name
	}
	return names
}

// list answers a folder's entries.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	root, name, p, f, st, err := s.openEntry(r)
	if err != nil {
		refuse(w, err)
		return
	}
	defer root.Close()
	defer f.Close()
	if !st.IsDir() {
		refuse(w, &jobfiles.Error{Kind: jobfiles.Invalid, Msg: jobfiles.Where(name, p) + ": not a folder"})
		return
	}
	des, err := f.ReadDir(jobfiles.MaxEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		refuse(w, jobfiles.FSError(name, p, err))
		return
	}
	l := jobfiles.Listing{Root: name, Path: p, Roots: s.rootNames(), Limits: s.Limits.WithDefaults(), Entries: []jobfiles.Entry{}}
	if len(des) > jobfiles.MaxEntries {
		des, l.Truncated = des[:jobfiles.MaxEntries], true
	}
	for _, de := range des {
		fi, err := de.Info() // lstat: a link is a link
		if err != nil {
			continue // gone since
		}
		e := entryOf(de.Name(), fi)
		if e.Type == jobfiles.TypeLink {
			e.Target, _ = root.Readlink(path.Join(p, de.Name()))
		}
		l.Entries = append(l.Entries, e)
	}
	slices.SortFunc(l.Entries, func(a, b jobfiles.Entry) int {
		if (a.Type == jobfiles.TypeDir) != (b.Type == jobfiles.TypeDir) {
			if a.Type == jobfiles.TypeDir {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	writeJSON(w, http.StatusOK, l)
}

// entryOf describes file fi, named name, without following a link.
func entryOf(name string, fi fs.FileInfo) jobfiles.Entry {
	e := jobfiles.Entry{Name: name, Size: fi.Size(), ModTime: fi.ModTime().UTC(), Type: jobfiles.TypeOther}
	switch m := fi.Mode(); {
	case m.IsRegular():
		e.Type = jobfiles.TypeFile
	case m.IsDir():
		e.Type, e.Size = jobfiles.TypeDir, 0
	case m&fs.ModeSymlink != 0:
		e.Type = jobfiles.TypeLink
	}
	return e
}

// openEntry opens, for reading, the file or folder r names (s.open)
// without waiting on a FIFO, and stats it: list and read start here.
// The caller closes f and root.
func (s *Server) openEntry(r *http.Request) (root *os.Root, name, p string, f *os.File, st fs.FileInfo, err error) {
	if root, name, p, err = s.open(r); err != nil {
		return nil, "", "", nil, nil, err
	}
	if f, err = root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0); err != nil {
		root.Close()
		return nil, "", "", nil, nil, jobfiles.FSError(name, p, err)
	}
	if st, err = f.Stat(); err != nil {
		f.Close()
		root.Close()
		return nil, "", "", nil, nil, jobfiles.FSError(name, p, err)
	}
	return root, name, p, f, st, nil
}

// read answers a regular file's bytes.
func (s *Server) read(w http.ResponseWriter, r *http.Request) {
	root, name, p, f, st, err := s.openEntry(r)
	if err != nil {
		refuse(w, err)
		return
	}
	defer root.Close()
	defer f.Close()
	switch {
	case st.IsDir():
		refuse(w, &jobfiles.Error{Kind: jobfiles.Invalid, Msg: jobfiles.Where(name, p) + ": a folder: download it as an archive"})
		return
	case !st.Mode().IsRegular():
		refuse(w, &jobfiles.Error{Kind: jobfiles.Invalid, Msg: jobfiles.Where(name, p) + ": not a regular file"})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	h.Set("Last-Modified", st.ModTime().UTC().Format(http.TimeFormat))
	w.WriteHeader(http.StatusOK)
	// A file that grows is sent as it was; one that shrinks ends the
	// reply early, which the client sees as an error.
	_, _ = io.CopyN(w, f, st.Size())
}

// archive answers a folder as a .tar.gz: its regular files, folders and
// links (as links), up to Limits.MaxArchive bytes of files, refused
// beforehand when more.
func (s *Server) archive(w http.ResponseWriter, r *http.Request) {
	root, name, p, err := s.open(r)
	if err != nil {
		refuse(w, err)
		return
	}
	defer root.Close()
	st, err := root.Stat(p)
	if err != nil {
		refuse(w, jobfiles.FSError(name, p, err))
		return
	}
	if !st.IsDir() {
		refuse(w, &jobfiles.Error{Kind: jobfiles.Invalid, Msg: jobfiles.Where(name, p) + ": not a folder: download it as a file"})
		return
	}
	limits := s.Limits.WithDefaults()
	var total int64
	var paths []string
	err = fs.WalkDir(root.FS(), p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, q)
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			total += fi.Size()
			if total > limits.MaxArchive {
				return &jobfiles.Error{Kind: jobfiles.TooLarge, Msg: fmt.Sprintf("%s: holds more than %s of files, this machine's archive limit (agent --max-archive); download its parts",
					jobfiles.Where(name, p), jobfiles.FormatBytes(limits.MaxArchive))}
			}
		}
		return nil
	})
	if err != nil {
		refuse(w, jobfiles.FSError(name, p, err))
		return
	}
	base := path.Base(p)
	if p == "." {
		base = name
	}
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("X-Archive-Bytes", strconv.FormatInt(total, 10))
	w.WriteHeader(http.StatusOK)
	// The fastest level: checkpoints (tensors) hardly compress, and a
	// folder of gigabytes is read at the disk's speed, not gzip's.
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	for _, q := range paths {
		rel := strings.TrimPrefix(strings.TrimPrefix(q, p), "/")
		if p == "." {
			rel = q
		}
		arcName := path.Join(base, rel)
		if err := addToArchive(tw, root, q, arcName); err != nil {
			// The reply is under way: only breaking it says so.
			panic(http.ErrAbortHandler)
		}
	}
	if tw.Close() != nil || zw.Close() != nil {
		panic(http.ErrAbortHandler)
	}
}

// addToArchive writes q of root to tw as arcName, never following a
// link, and skips what is neither a file, a folder nor a link.
func addToArchive(tw *tar.Writer, root *os.Root, q, arcName string) error {
	fi, err := root.Lstat(q)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // gone since the walk
	}
	if err != nil {
		return err
	}
	link := ""
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		if link, err = root.Readlink(q); err != nil {
			return err
		}
	case m.IsDir(), m.IsRegular():
	default:
		return nil
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	hdr.Name = arcName
	if fi.IsDir() {
		hdr.Name += "/"
	}
	hdr.Uname, hdr.Gname = "", ""
	// PAX keeps write times to the nanosecond (USTAR rounds them to the
	// second): a restored checkpoint is dated as it was written.
	hdr.Format = tar.FormatPAX
	if !fi.Mode().IsRegular() {
		return tw.WriteHeader(hdr)
	}
	f, err := root.OpenFile(q, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return nil // swapped since
	}
	hdr.Size = st.Size()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, hdr.Size)
	return err
}

// write writes the body to a new file (or over a regular file) in a
// folder that exists: to a temporary file first, renamed into place once
// complete, so that a failed upload leaves nothing behind.
func (s *Server) write(w http.ResponseWriter, r *http.Request) {
	root, name, p, err := s.open(r)
	if err != nil {
		refuse(w, err)
		return
	}
	defer root.Close()
	if p == "." {
		refuse(w, &jobfiles.Error{Kind: jobfiles.Invalid, Msg: "path: name the file to write"})
		return
	}
	limits := s.Limits.WithDefaults()
	tooLarge := &jobfiles.Error{Kind: jobfiles.TooLarge, Msg: fmt.Sprintf("file: over this machine's upload limit of %s (agent --max-upload)", jobfiles.FormatBytes(limits.MaxUpload))}
	if r.ContentLength > limits.MaxUpload {
		// Before the body comes (the client waits with Expect:
		// 100-continue).
		tooLarge.Msg = fmt.Sprintf("file: %s is over this machine's upload limit of %s (agent --max-upload)", jobfiles.FormatBytes(r.ContentLength), jobfiles.FormatBytes(limits.MaxUpload))
		refuse(w, tooLarge)
		return
	}
	if fi, err := root.Lstat(p); err == nil && !fi.Mode().IsRegular() {
		refuse(w, &jobfiles.Error{Kind: jobfiles.Invalid, Msg: jobfiles.Where(name, p) + ": exists and is not a regular file"})
		return
	}
	dir, base := path.Split(p)
	if dir == "" {
		dir = "."
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	tmp := path.Join(dir, "."+base+".upload-"+hex.EncodeToString(b))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		refuse(w, jobfiles.FSError(name, dir, err))
		return
	}
	n, err := io.Copy(f, io.LimitReader(r.Body, limits.MaxUpload+1))
	if err == nil && n > limits.MaxUpload {
		// A body of unknown length: the rest is read and dropped, so
		// that the client reads this answer rather than a broken pipe.
		_, _ = io.Copy(io.Discard, r.Body)
		err = tooLarge
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, p)
	}
	if err != nil {
		_ = root.Remove(tmp)
		refuse(w, jobfiles.FSError(name, p, err))
		return
	}
	fi, err := root.Lstat(p)
	if err != nil {
		refuse(w, jobfiles.FSError(name, p, err))
		return
	}
	writeJSON(w, http.StatusCreated, entryOf(path.Base(p), fi))
}

// refuse answers err: a refusal with its status, anything else as an
// internal error.
func refuse(w http.ResponseWriter, err error) {
	var e *jobfiles.Error
	if !errors.As(err, &e) {
		e = &jobfiles.Error{Kind: "internal", Msg: err.Error()}
		writeJSON(w, http.StatusInternalServerError, e)
		return
	}
	writeJSON(w, status(e.Kind), e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
