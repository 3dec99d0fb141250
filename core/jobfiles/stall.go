package jobfiles

import (
	"context"
	"io"
	"sync/atomic"
	"time"
)

// StallTimeout is how long a copy of a folder (a checkpoint's, to or
// from the server) may go without a byte before it is given up: a machine
// frozen or cut off mid-copy must not hold the copy, and what waits on it,
// for the copy's whole time limit.
const StallTimeout = 30 * time.Second

// CancelOnStall returns r, read through a watch that calls cancel once no
// byte has come for quiet; the watch ends with ctx. Reads of r made with
// a request of ctx then fail.
func CancelOnStall(ctx context.Context, cancel context.CancelFunc, r io.Reader, quiet time.Duration) io.Reader {
	w := &stallReader{r: r}
	w.last.Store(time.Now().UnixNano())
	go func() {
		tick := time.NewTicker(max(quiet/4, time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				if now.Sub(time.Unix(0, w.last.Load())) > quiet {
					cancel()
					return
				}
			}
		}
	}()
	return w
}

// stallReader notes when it last read a byte.
type stallReader struct {
	r    io.Reader
	last atomic.Int64 // Unix nanoseconds
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.last.Store(time.Now().UnixNano())
	}
	return n, err
}
