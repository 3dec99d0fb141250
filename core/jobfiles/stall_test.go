package jobfiles

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestCancelOnStall: a reader that keeps giving bytes is read to its end;
// one that stops is cancelled after the quiet time.
func TestCancelOnStall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := CancelOnStall(ctx, cancel, strings.NewReader("all of it"), time.Second)
	b, err := io.ReadAll(r)
	if err != nil || string(b) != "all of it" || ctx.Err() != nil {
		t.Fatalf("read %q, %v (ctx %v); want all of it, not cancelled", b, err, ctx.Err())
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte("a little"))
		<-ctx2.Done() // then nothing, until cancelled
		pw.CloseWithError(ctx2.Err())
	}()
	began := time.Now()
	_, err = io.ReadAll(CancelOnStall(ctx2, cancel2, pr, 50*time.Millisecond))
	if !errors.Is(err, context.Canceled) || time.Since(began) > 5*time.Second {
		t.Errorf("a stalled read ended with %v after %v; want cancelled soon after 50ms", err, time.Since(began))
	}
}
