package hub

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gpuportal/gpuportal/core/agent/wire"
	"github.com/gpuportal/gpuportal/core/job"
	"github.com/gpuportal/gpuportal/core/jobfiles"
)

// Checkpoint copies (job/checkpoint.go): the hub keeps, for each part of
// a running or waiting job, a copy of the part's checkpoint folder as its
// machine last reported it, in CheckpointDir (JOB-PART.tar.gz and
// JOB-PART.json, each written whole and renamed into place). A folder is
// copied when its machine reports it changed and then held still (its
// newest file written at least stillFor before the reading, by the
// machine's clock, or the same in two readings in a row), and as its run
// ends; a copy during which a file was written is dropped. A
// start of the part carries the copy; the machine fetches it with a
// one-time token (serveCheckpoint) when its own folder is older, and
// waits for a copy still being made.

// DefaultCheckpointMax is the largest checkpoint folder copied by default
// (bytes of files): serve --checkpoint-copy-max.
const DefaultCheckpointMax int64 = 2 << 30

// stillFor is how long a folder's newest file must be older than its
// machine's reading for the folder to be copied: a file being written has
// its write time moved by each write, so a job saving now shows a newer
// one. A job that saves more often than this (and than the readings, a
// second apart) is copied when two readings find the same.
const stillFor = 500 * time.Millisecond

// copyEvery is the least time between the starts of two copies of a
// part while its run goes (not at its end): a folder the job writes into
// every second (a log beside its checkpoints) is not copied every second.
// A copy that took d waits 4d (a large folder is copied at most a fifth
// of the time).
const copyEvery = 2 * time.Second

// adoptRetry is how long a part the hub could not adopt (checkpoints.adopt)
// waits before it is tried again.
const adoptRetry = 30 * time.Second

// copiesAtOnce bounds the copies made at once, across all jobs: each
// reads a folder through its machine's agent and writes it to the
// server's disk.
const copiesAtOnce = 4

// copyTimeout bounds the making of one copy.
const copyTimeout = 30 * time.Minute

// grantTTL is how long a start's token to fetch a copy is good for.
const grantTTL = 15 * time.Minute

// partKey names a part of a job.
type partKey struct {
	job  int64
	part int
}

// copyMeta is what a copy holds: the machine it was read from, its
// folder's newest write and the run that wrote it (0: not known), and its
// size (of the archive; of the folder's files).
type copyMeta struct {
	Job       int64     `json:"job"`
	Part      int       `json:"part"`
	Run       int64     `json:"run"`
	Node      string    `json:"node"`
	At        time.Time `json:"at"`
	Bytes     int64     `json:"bytes"`
	FileBytes int64     `json:"file_bytes"`
	Files     int       `json:"files"`
	CopiedAt  time.Time `json:"copied_at"`
}

// kept is a part's copy on disk (meta.At zero: none yet), the newer one
// being made, if any, and the one of a run's last save waiting for it.
type kept struct {
	meta   copyMeta
	making *making
	next   *making
	// began is when the last copy began, took how long it took.
	began time.Time
	took  time.Duration
}

// making is a copy under way, or waiting for the one under way: read from
// node as account; done closes when it is on disk or failed.
type making struct {
	meta    copyMeta
	node    *remoteNode
	account string
	done    chan struct{}
}

// newest is the copy a start gets: the one that waits, else the one
// under way, else the one on disk.
func (kp *kept) newest() copyMeta {
	switch {
	case kp.next != nil:
		return kp.next.meta
	case kp.making != nil:
		return kp.making.meta
	}
	return kp.meta
}

// partRun is what the hub knows of a part's running run: where it runs,
// as whom, and the folder its machine last reported.
type partRun struct {
	run     int64
	node    string
	account string
	last    time.Time
}

// grant is a start's permission to fetch a part's copy.
type grant struct {
	key     partKey
	expires time.Time
}

// checkpoints are the hub's copies.
type checkpoints struct {
	dir  string // "": copies are off
	max  int64
	jobs JobStates
	log  *slog.Logger

	mu       sync.Mutex
	swept    time.Time // the last sweep (maybeSweep)
	sweeping bool
	kept     map[partKey]*kept
	running  map[partKey]*partRun
	grants   map[string]grant
	// adopting are the parts adopt is looking up; adoptAfter, those it
	// failed to, when to try again.
	adopting   map[partKey]bool
	adoptAfter map[partKey]time.Time
	// tooBig are the saves too big to copy, said once each.
	tooBig map[partKey]time.Time
	// stats are the counters of /metrics (job.CheckpointCopyStats).
	copied, failed, copiedBytes, fetched int64
	// files reaches a job's files on a machine: through its agent.
	files func(n *remoteNode, jobID int64, account string) jobfiles.Files
	// slots holds a token per copy being made (copiesAtOnce).
	slots chan struct{}
	// every is copyEvery; 0 (tests) copies as soon as a folder is still.
	every time.Duration
}

// newCheckpoints loads the copies kept in dir (none when dir is "").
func newCheckpoints(dir string, maxBytes int64, jobs JobStates, log *slog.Logger) *checkpoints {
	c := &checkpoints{dir: dir, max: maxBytes, jobs: jobs, log: log,
		kept: make(map[partKey]*kept), running: make(map[partKey]*partRun), grants: make(map[string]grant),
		tooBig: make(map[partKey]time.Time), slots: make(chan struct{}, copiesAtOnce), every: copyEvery,
		files: func(n *remoteNode, jobID int64, account string) jobfiles.Files { return n.JobFiles(jobID, account) }}
	if dir == "" || maxBytes <= 0 {
		c.dir = ""
		return c
	}
	metas, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, p := range metas {
		var m copyMeta
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err == nil {
			_, err = os.Stat(c.archive(partKey{m.Job, m.Part}))
		}
		if err != nil {
			log.Warn("a checkpoint copy left unread", "file", p, "err", err)
			continue
		}
		c.kept[partKey{m.Job, m.Part}] = &kept{meta: m}
	}
	return c
}

func (c *checkpoints) base(k partKey) string {
	return filepath.Join(c.dir, strconv.FormatInt(k.job, 10)+"-"+strconv.Itoa(k.part))
}
func (c *checkpoints) archive(k partKey) string  { return c.base(k) + ".tar.gz" }
func (c *checkpoints) metaPath(k partKey) string { return c.base(k) + ".json" }

// started notes a run of a part starting on node and returns the copy to
// send with it (nil: none).
func (c *checkpoints) started(node string, s job.Spec) *job.CheckpointCopy {
	if c.dir == "" || !s.Checkpointed() {
		return nil
	}
	k := partKey{s.JobID, s.Part()}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running[k] = &partRun{run: s.Run, node: node, account: s.Account}
	kp := c.kept[k]
	if kp == nil {
		return nil
	}
	m := kp.newest()
	if m.At.IsZero() {
		return nil
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	token := base64.RawURLEncoding.EncodeToString(b)
	now := time.Now()
	for t, g := range c.grants {
		if now.After(g.expires) {
			delete(c.grants, t)
		}
	}
	c.grants[token] = grant{key: k, expires: now.Add(grantTTL)}
	return &job.CheckpointCopy{Run: m.Run, Node: m.Node, At: m.At, Bytes: m.Bytes, Token: token}
}

// newer reports whether a folder as st says is newer than what part k
// has copied or is copying, and small enough to copy. A reading while a
// copy is under way waits for the next (final: a run's end, which has no
// next reading, and whose copy then follows the one under way).
func (c *checkpoints) newer(k partKey, st job.CheckpointState, final bool) bool {
	if st.Empty() {
		return false
	}
	if st.Bytes > c.max {
		if !c.tooBig[k].Equal(st.At) {
			c.tooBig[k] = st.At // said once a save
			c.log.Warn("checkpoint folder not copied: over --checkpoint-copy-max; a run of the job on another machine starts from its folder there",
				"job", k.job, "part", k.part, "bytes", st.Bytes, "max", c.max)
		}
		return false
	}
	kp := c.kept[k]
	if kp == nil {
		return true
	}
	if kp.making != nil && !final {
		return false // the next reading copies what it missed
	}
	if !final && c.every > 0 && time.Since(kp.began) < max(c.every, 4*kp.took) {
		return false
	}
	return st.At.After(kp.newest().At)
}

// observe reads a heartbeat's usage of n's runs: a folder newer than its
// copy that holds still (stillFor by the machine's clock, or the same as
// in the previous reading) is copied, paced (newer).
func (c *checkpoints) observe(n *remoteNode, us []job.Usage) {
	if c.dir == "" {
		return
	}
	var unknown []partKey
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		if len(unknown) > 0 {
			go c.adopt(n, unknown)
		}
	}()
	for _, u := range us {
		if u.Checkpoint == nil {
			continue
		}
		k := partKey{u.JobID, u.Checkpoint.Part}
		pr := c.running[k]
		if pr == nil {
			unknown = append(unknown, k)
			continue
		}
		if pr.node != n.name {
			continue
		}
		settled := u.Checkpoint.At.Equal(pr.last) || !u.At.IsZero() && u.At.Sub(u.Checkpoint.At) >= stillFor
		pr.last = u.Checkpoint.At
		if settled && c.newer(k, *u.Checkpoint, false) {
			c.copyLocked(n, k, pr, *u.Checkpoint)
		}
	}
}

// adopt learns of parts running on n that no start told the hub of (they
// ran on when this server started, or took over from another): the run
// from the agent's hello, the account from the store.
func (c *checkpoints) adopt(n *remoteNode, parts []partKey) {
	if c.jobs == nil {
		return
	}
	c.mu.Lock()
	if c.adopting == nil {
		c.adopting, c.adoptAfter = make(map[partKey]bool), make(map[partKey]time.Time)
	}
	var todo []partKey
	now := time.Now()
	for _, k := range parts {
		if !c.adopting[k] && now.After(c.adoptAfter[k]) {
			c.adopting[k] = true
			todo = append(todo, k)
		}
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		for _, k := range todo {
			delete(c.adopting, k)
		}
		c.mu.Unlock()
	}()
	// A part that cannot be adopted now (its run not reported, its
	// account not read) is tried again after adoptRetry, not at each
	// heartbeat.
	retryLater := func(k partKey) {
		c.mu.Lock()
		c.adoptAfter[k] = time.Now().Add(adoptRetry)
		c.mu.Unlock()
	}
	for _, k := range todo {
		var run int64
		for _, ref := range n.Running() {
			if ref.Job == k.job {
				run = ref.Run
			}
		}
		if run == 0 {
			retryLater(k)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		account, err := c.jobs.Account(ctx, k.job)
		cancel()
		if err != nil {
			c.log.Warn("checkpoint of a running job not copied for now: its account cannot be read", "job", k.job, "err", err)
			retryLater(k)
			continue
		}
		c.mu.Lock()
		if c.running[k] == nil {
			c.running[k] = &partRun{run: run, node: n.name, account: account}
		}
		delete(c.adoptAfter, k)
		c.mu.Unlock()
	}
}

// ended reads a run's exit: its folder, when newer than its copy, is
// copied now, before the engine hears of the end, so that a start of the
// job that follows waits for the copy.
func (c *checkpoints) ended(n *remoteNode, ex job.Exit) {
	if c.dir == "" || ex.Checkpoint == nil {
		return
	}
	k := partKey{ex.JobID, ex.Checkpoint.Part}
	c.mu.Lock()
	defer c.mu.Unlock()
	pr := c.running[k]
	if pr == nil || pr.node != n.name || pr.run != ex.Run {
		return
	}
	delete(c.running, k)
	if c.newer(k, *ex.Checkpoint, true) {
		c.copyLocked(n, k, pr, *ex.Checkpoint)
	}
}

// copyLocked starts copying part k's folder from n, as st describes it,
// or, while a copy is under way, has it follow that one; c.mu is held.
func (c *checkpoints) copyLocked(n *remoteNode, k partKey, pr *partRun, st job.CheckpointState) {
	kp := c.kept[k]
	if kp == nil {
		kp = &kept{}
		c.kept[k] = kp
	}
	m := &making{node: n, account: pr.account, done: make(chan struct{}), meta: copyMeta{Job: k.job, Part: k.part,
		Run: st.Run, Node: n.name, At: st.At, FileBytes: st.Bytes, Files: st.Files}}
	if kp.making != nil {
		if kp.next != nil {
			close(kp.next.done) // replaced by a newer one before it began
		}
		kp.next = m
		return
	}
	kp.making = m
	go c.make(k, kp, m)
}

// make makes copy m of part k, then the one that waits for it, if any.
func (c *checkpoints) make(k partKey, kp *kept, m *making) {
	for m != nil {
		c.slots <- struct{}{}
		began := time.Now()
		c.mu.Lock()
		kp.began = began
		c.mu.Unlock()
		err := c.copy(m.node, m.account, m)
		<-c.slots
		c.mu.Lock()
		kp.took = time.Since(began)
		if err == nil {
			kp.meta = m.meta
			c.copied++
			c.copiedBytes += m.meta.Bytes
		} else {
			c.failed++
		}
		done := m.done
		kp.making, kp.next = kp.next, nil
		next := kp.making
		c.mu.Unlock()
		close(done)
		if err != nil {
			c.log.Warn("checkpoint not copied", "job", k.job, "part", k.part, "run", m.meta.Run, "node", m.meta.Node, "err", err)
		} else {
			c.log.Info("checkpoint copied", "job", k.job, "part", k.part, "run", m.meta.Run, "node", m.meta.Node,
				"written", m.meta.At, "bytes", m.meta.Bytes, "files", m.meta.Files)
		}
		m = next
	}
}

// copy reads m's folder from n through a files tunnel, as account, and
// puts it in place of the part's copy.
func (c *checkpoints) copy(n *remoteNode, account string, m *making) error {
	ctx, cancel := context.WithTimeout(context.Background(), copyTimeout)
	defer cancel()
	k := partKey{m.meta.Job, m.meta.Part}
	d, err := c.files(n, k.job, account).Archive(ctx, jobfiles.JobRoot, "checkpoint")
	if err != nil {
		return fmt.Errorf("read the folder: %w", err)
	}
	defer d.Body.Close()
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.dir, ".copy-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	// Compressed, it is no larger than its files and their headers.
	limit := m.meta.FileBytes + int64(m.meta.Files+16)*2048 + 1<<20
	counted := &countingWriter{w: tmp}
	body := jobfiles.CancelOnStall(ctx, cancel, io.LimitReader(d.Body, limit+1), jobfiles.StallTimeout)
	newest, err := newestInArchive(io.TeeReader(body, counted))
	n64 := counted.n
	switch {
	case err != nil:
	case n64 > limit:
		err = fmt.Errorf("the folder grew past the %s reported while it was read", jobfiles.FormatBytes(m.meta.FileBytes))
	case newest.After(m.meta.At):
		// A file written while the folder was read may be torn: the
		// next reading that finds the folder still copies it.
		err = fmt.Errorf("the job wrote to the folder (at %s) while it was read", newest.UTC().Format(time.RFC3339Nano))
	default:
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("read the folder: %w", err)
	}
	m.meta.Bytes, m.meta.CopiedAt = n64, time.Now()
	b, err := json.Marshal(m.meta)
	if err != nil {
		return err
	}
	// The archive first: a crash between the two leaves a copy newer
	// than its description says, never older.
	if err := os.Rename(tmp.Name(), c.archive(k)); err != nil {
		return err
	}
	return writeFileAtomic(c.metaPath(k), b)
}

// countingWriter counts what it writes to w.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// newestInArchive reads a .tar.gz to its end and returns when its newest
// regular file was written.
func newestInArchive(r io.Reader) (time.Time, error) {
	var newest time.Time
	zr, err := gzip.NewReader(r)
	if err != nil {
		return newest, fmt.Errorf("read the folder: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return newest, fmt.Errorf("read the folder: %w", err)
		}
		if hdr.Typeflag == tar.TypeReg && hdr.ModTime.After(newest) {
			newest = hdr.ModTime
		}
	}
	// The rest of the stream (gzip's trailer, tar's padding) is copied
	// too.
	_, err = io.Copy(io.Discard, r)
	return newest, err
}

// serveCheckpoint answers an agent's fetch of a copy: the token of a
// start names the part; a copy still being made is waited for.
func (c *checkpoints) serveCheckpoint(w http.ResponseWriter, r *http.Request) {
	token := r.Header.Get(wire.CheckpointTokenHeader)
	c.mu.Lock()
	g, ok := c.grants[token]
	if ok {
		delete(c.grants, token) // once
	}
	c.mu.Unlock()
	if !ok || token == "" || time.Now().After(g.expires) {
		writeJSONError(w, http.StatusUnauthorized, "no such checkpoint token: a start's token is good once, for "+grantTTL.String())
		return
	}
	for {
		c.mu.Lock()
		kp := c.kept[g.key]
		var wait chan struct{}
		if kp != nil && kp.making != nil {
			wait = kp.making.done // and then the next, if any
		}
		c.mu.Unlock()
		if wait == nil {
			break
		}
		select {
		case <-wait:
		case <-r.Context().Done():
			return
		}
	}
	c.mu.Lock()
	f, err := os.Open(c.archive(g.key))
	c.mu.Unlock()
	if err != nil {
		writeJSONError(w, http.StatusNotFound, "the server keeps no copy of this checkpoint now")
		return
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil {
		w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	}
	w.Header().Set("Content-Type", "application/gzip")
	if _, err := io.Copy(w, f); err != nil {
		c.log.Warn("checkpoint copy not sent whole", "job", g.key.job, "part", g.key.part, "err", err)
		return
	}
	c.mu.Lock()
	c.fetched++
	c.mu.Unlock()
}

// of are the copies of job id's parts on disk, by part.
func (c *checkpoints) of(id int64) []job.CheckpointCopy {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []job.CheckpointCopy
	for k, kp := range c.kept {
		if k.job == id && !kp.meta.At.IsZero() {
			m := kp.meta
			out = append(out, job.CheckpointCopy{Part: m.Part, Run: m.Run, Node: m.Node, At: m.At, Bytes: m.Bytes})
		}
	}
	slices.SortFunc(out, func(a, b job.CheckpointCopy) int { return a.Part - b.Part })
	return out
}

// stats are the copies' figures for /metrics.
func (c *checkpoints) stats() job.CheckpointCopyStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := job.CheckpointCopyStats{Copied: c.copied, Failed: c.failed, CopiedBytes: c.copiedBytes, Fetched: c.fetched}
	for _, kp := range c.kept {
		if !kp.meta.At.IsZero() {
			st.Kept++
			st.KeptBytes += kp.meta.Bytes
		}
	}
	return st
}

// sweepEvery is how often the hub asks which of the jobs it keeps copies
// for have ended.
const sweepEvery = time.Minute

// maybeSweep drops, at most every sweepEvery, the copies of the jobs
// that have ended, as jobs says; a store that cannot answer leaves them
// for the next sweep.
func (c *checkpoints) maybeSweep() {
	if c.dir == "" || c.jobs == nil {
		return
	}
	c.mu.Lock()
	now := time.Now()
	if now.Sub(c.swept) < sweepEvery || c.sweeping {
		c.mu.Unlock()
		return
	}
	c.swept, c.sweeping = now, true
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			c.sweeping = false
			c.mu.Unlock()
		}()
		ids := c.keptJobs()
		if len(ids) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ended, err := c.jobs.Ended(ctx, ids)
		if err != nil {
			c.log.Warn("checkpoint copies of ended jobs left for now: their jobs cannot be read", "err", err)
			return
		}
		c.forget(ended)
	}()
}

// forget drops the copies of jobs that have ended, and what the hub
// knew of their runs.
func (c *checkpoints) forget(ended []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ended {
		for k := range c.running {
			if k.job == id {
				delete(c.running, k)
			}
		}
		for k := range c.tooBig {
			if k.job == id {
				delete(c.tooBig, k)
			}
		}
		for k := range c.adoptAfter {
			if k.job == id {
				delete(c.adoptAfter, k)
			}
		}
		for k, kp := range c.kept {
			if k.job != id || kp.making != nil || kp.next != nil {
				continue
			}
			delete(c.kept, k)
			for _, p := range []string{c.archive(k), c.metaPath(k)} {
				if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					c.log.Warn("remove a checkpoint copy", "file", p, "err", err)
				}
			}
		}
	}
}

// keptJobs are the jobs the hub keeps copies for, or knows runs of.
func (c *checkpoints) keptJobs() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := make(map[int64]bool)
	var out []int64
	add := func(k partKey) {
		if !seen[k.job] {
			seen[k.job] = true
			out = append(out, k.job)
		}
	}
	for k := range c.kept {
		add(k)
	}
	for k := range c.running {
		add(k)
	}
	for k := range c.tooBig {
		add(k)
	}
	slices.Sort(out)
	return out
}
