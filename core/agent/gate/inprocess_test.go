package gate

import (
	"context"
	"errors"
	"testing"
	"time"
)

// acquireAsync acquires in the background and delivers the result.
func acquireAsync(ctx context.Context, s *Server, id int64) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, _, err := s.Acquire(ctx, id, 0)
		ch <- err
	}()
	return ch
}

func TestInProcessOneLaneTakesTurns(t *testing.T) {
	s := newServer(t, []int64{gpuMiB}, Config{})
	add(t, s, 1, wide, 0)
	add(t, s, 2, wide, 0)
	ctx := context.Background()
	if size, n, err := s.Acquire(ctx, 1, 0); err != nil || n != 2 || size <= 0 {
		t.Fatalf("acquire 1: lane %d MiB of %d jobs, %v", size, n, err)
	}
	b := acquireAsync(ctx, s, 2)
	select {
	case err := <-b:
		t.Fatalf("job 2 ran beside job 1 in one lane (%v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := s.Release(1, 3900); err != nil {
		t.Fatal(err)
	}
	if err := <-b; err != nil {
		t.Fatalf("acquire 2: %v", err)
	}
	if v := s.View()[0].Lanes[0]; v.Running != 2 {
		t.Fatalf("running %d, want job 2", v.Running)
	}
	if err := s.Release(2, 0); err != nil {
		t.Fatal(err)
	}
}

func TestInProcessCancelAndExceed(t *testing.T) {
	stopped := make(chan int64, 1)
	s := newServer(t, []int64{gpuMiB}, Config{Stop: func(id int64, _ *ExceededError) { stopped <- id }})
	add(t, s, 1, wide, 0)
	add(t, s, 2, wide, 0)
	if _, _, err := s.Acquire(context.Background(), 1, 0); err != nil {
		t.Fatal(err)
	}
	// A waiting acquire whose context ends gives up its turn.
	ctx, cancel := context.WithCancel(context.Background())
	b := acquireAsync(ctx, s, 2)
	cancel()
	if err := <-b; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled acquire: %v", err)
	}
	// A peak beyond the lane stops the job.
	var ex *ExceededError
	if err := s.Release(1, 1<<20); !errors.As(err, &ex) || !ex.Measured {
		t.Fatalf("release with a huge peak: %v", err)
	}
	if id := <-stopped; id != 1 {
		t.Fatalf("stopped %d", id)
	}
	if _, _, err := s.Acquire(context.Background(), 1, 0); !errors.As(err, &ex) {
		t.Fatalf("acquire after outgrowing: %v", err)
	}
	if _, _, err := s.Acquire(context.Background(), 9, 0); !errors.Is(err, ErrNotAdded) {
		t.Fatalf("unknown job: %v", err)
	}
	if err := s.Release(2, 0); !errors.Is(err, ErrProtocol) {
		t.Fatalf("release without an iteration: %v", err)
	}
}
