package joboutput

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Open opens a job's output file for reading as the agent or the server
// (often root) does: a regular file reached without a link, with one
// name. A job owns the folder its output is in (it runs as its owner's
// account), so it could swap the file for a link to a file it may not
// read (/etc/shadow) or for a FIFO that would block its reader; Open
// refuses both, and hard links.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a link, not the job's output: not read", path)
		}
		return nil, err
	}
	if err := CheckRegular(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CheckRegular reports an error unless f is a regular file with one name:
// a link put there by a job is not a job's output.
func CheckRegular(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s): not used", f.Name(), fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fmt.Errorf("%s has %d names (a hard link put there by a job?): not used", f.Name(), st.Nlink)
	}
	return nil
}
