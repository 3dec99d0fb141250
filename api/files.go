package api

import "time"

// FileListing is a folder of a job's files (docs/files.md): in Root,
// "job" (the job's own folder on the machine that ran it) or a data path
// the machine allows, at Path ("." for the root itself).
type FileListing struct {
	Job int64 `json:"job"`
	// Node is the machine listed; Nodes are all the machines of the job's
	// current or last run, rank 0 first, each with its own job folder
	// (?node= names one).
	Node    string      `json:"node"`
	Nodes   []string    `json:"nodes"`
	Root    string      `json:"root"`
	Path    string      `json:"path"`
	Roots   []string    `json:"roots"`
	Entries []FileEntry `json:"entries"`
	// Truncated: the folder holds more entries than a listing returns.
	Truncated bool `json:"truncated,omitempty"`
	// MaxUploadBytes and MaxArchiveBytes are the machine's limits on an
	// uploaded file and on a folder's archive.
	MaxUploadBytes  int64 `json:"max_upload_bytes"`
	MaxArchiveBytes int64 `json:"max_archive_bytes"`
	// CanUpload: the asker may upload here (the job's owner, an admin).
	CanUpload bool `json:"can_upload"`
}

// FileEntry is one item of a folder: a file, a folder, a link (never
// followed out of its root; Target is where it points) or "other".
type FileEntry struct {
	Name    string    `json:"name"`
	Type    string    `json:"type"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	Target  string    `json:"target,omitempty"`
}
