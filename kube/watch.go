package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// listWatch lists one kind of object and watches it from a resource
// version: the two calls a mirror makes.
type listWatch struct {
	what  string // "nodes", "gpuportal's pods", ...
	list  func(ctx context.Context, opts metav1.ListOptions) ([]runtime.Object, string, error)
	watch func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// mirrorSink takes what a mirror learns: a whole list, replacing what it
// had (after a start, an expired watch or an API server that lost its
// history), or one change.
type mirrorSink interface {
	replace(objs []runtime.Object)
	apply(ev watch.EventType, obj runtime.Object)
}

// errRelist says that a watch cannot resume where it stopped: its
// resource version is too old (410 Gone, "Expired"). Everything is listed
// again.
var errRelist = errors.New("relist")

// follow keeps sink a copy of what lw lists until ctx ends: it lists,
// then watches from the list's resource version, and watches again from
// the last version seen whenever a watch ends (the API server closes them
// now and then, or restarts); when the version has expired it lists
// again, so nothing that changed meanwhile is lost. Failures are retried
// with a backoff of up to 5 s.
func follow(ctx context.Context, log *slog.Logger, lw listWatch, sink mirrorSink) {
	backoff := newBackoff()
	for ctx.Err() == nil {
		objs, rv, err := lw.list(ctx, metav1.ListOptions{})
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("list failed; trying again", "what", lw.what, "err", err)
				backoff.wait(ctx)
			}
			continue
		}
		backoff.reset()
		sink.replace(objs)
		for ctx.Err() == nil {
			next, err := watchOnce(ctx, lw, rv, sink)
			if errors.Is(err, errRelist) {
				log.Info("watch expired: listing again", "what", lw.what, "resource_version", rv)
				break
			}
			if next != "" {
				rv = next
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				log.Warn("watch failed; watching again", "what", lw.what, "resource_version", rv, "err", err)
				backoff.wait(ctx)
				continue
			}
			backoff.reset()
		}
	}
}

// watchOnce watches from resource version rv until the watch ends, and
// returns the last resource version seen (empty: none).
func watchOnce(ctx context.Context, lw listWatch, rv string, sink mirrorSink) (string, error) {
	timeout := int64(5 * 60)
	w, err := lw.watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
	if err != nil {
		if expired(err) {
			return "", errRelist
		}
		return "", fmt.Errorf("watch %s: %w", lw.what, err)
	}
	defer w.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return last, nil // closed by the server: watch again from last
			}
			switch ev.Type {
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if expired(err) {
					return last, errRelist
				}
				return last, fmt.Errorf("watch %s: %w", lw.what, err)
			case watch.Bookmark:
			default:
				sink.apply(ev.Type, ev.Object)
			}
			if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
				last = m.GetResourceVersion()
			}
		}
	}
}

// expired reports whether err says a resource version is too old.
func expired(err error) bool {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return true
	}
	var st apierrors.APIStatus
	return errors.As(err, &st) && st.Status().Code == http.StatusGone
}

// backoff waits longer after each failure in a row, up to 5 s.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 100 * time.Millisecond} }

func (b *backoff) reset() { b.d = 100 * time.Millisecond }

func (b *backoff) wait(ctx context.Context) {
	t := time.NewTimer(b.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	b.d = min(2*b.d, 5*time.Second)
}
