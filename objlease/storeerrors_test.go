package objlease_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

// result runs f in the background and returns its error, failing the test
// if f does not return: a loop waiting on the fake clock never would.
func result(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("did not return: it keeps retrying")
		return nil
	}
}

// warnings collects the messages of Warn records.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		w.mu.Lock()
		w.msgs = append(w.msgs, r.Message)
		w.mu.Unlock()
	}
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.msgs)
}

var configErrors = []error{providers.ErrNoBucket, providers.ErrPermission, providers.ErrWrongEndpoint, errors.ErrUnsupported}

func TestAcquireEndsAtOnceWhenTheStoreRefuses(t *testing.T) {
	for _, sentinel := range configErrors {
		t.Run(sentinel.Error(), func(t *testing.T) {
			_, hs := newMem()
			hs.setHooks(func(op, key string) error { return providers.Wrap(op, key, sentinel, nil) }, nil)
			c := newClient(t, hs, "a", clock.NewFake(epoch))
			err := result(t, func() error { _, err := c.Acquire(context.Background()); return err })
			if !errors.Is(err, sentinel) {
				t.Fatalf("acquire: %v, want %v", err, sentinel)
			}
			if n := hs.requests(); n["create"] != 1 || len(n) != 1 {
				t.Errorf("requests %v, want one create", n)
			}
		})
	}
}

func TestResolveEndsAtOnceWhenTheReReadIsRefused(t *testing.T) {
	for _, sentinel := range configErrors {
		t.Run(sentinel.Error(), func(t *testing.T) {
			_, hs := newMem()
			hs.setHooks(func(op, key string) error {
				if op == "create" {
					return providers.Wrap(op, key, providers.ErrUnknownOutcome, nil)
				}
				return providers.Wrap(op, key, sentinel, nil)
			}, nil)
			c := newClient(t, hs, "a", clock.NewFake(epoch))
			err := result(t, func() error { _, err := c.TryAcquire(context.Background()); return err })
			if !errors.Is(err, objlease.ErrAmbiguous) || !errors.Is(err, sentinel) {
				t.Fatalf("acquire: %v, want ErrAmbiguous wrapping %v", err, sentinel)
			}
			if n := hs.requests(); n["create"] != 1 || n["get"] != 1 {
				t.Errorf("requests %v, want one create and one get", n)
			}
		})
	}
}

// An unreachable store is tried again, with growing waits, and warned
// about once; when it answers again, the lease is taken.
func TestAcquireRetriesAnUnreachableStoreWithBackoff(t *testing.T) {
	_, hs := newMem()
	var mu sync.Mutex
	down := 6
	hs.setHooks(func(op, key string) error {
		mu.Lock()
		defer mu.Unlock()
		if down > 0 {
			down--
			return providers.Wrap(op, key, providers.ErrUnreachable, errors.New("connection refused"))
		}
		return nil
	}, nil)
	clk := clock.NewFake(epoch)
	w := &warnings{}
	c := newClientOn(t, hs, "a", objlease.SessionOptions{Clock: clk, Logger: slog.New(w)})
	done := make(chan error, 1)
	go func() {
		l, err := c.Acquire(context.Background())
		if err == nil {
			defer l.Release(context.Background())
		}
		done <- err
	}()
	var waits []time.Duration
	for len(waits) < 6 {
		waitTimers(t, clk, 1)
		next, _ := clk.NextDeadline()
		waits = append(waits, next.Sub(clk.Now()))
		clk.Advance(next.Sub(clk.Now()))
		if len(waits) == 6 {
			break
		}
	}
	if err := result(t, func() error { return <-done }); err != nil {
		t.Fatalf("acquire: %v", err)
	}
	for i := 1; i < len(waits); i++ {
		if waits[i] < waits[i-1] || waits[i] > 2*time.Second {
			t.Errorf("waits %v: want growing waits up to PollInterval", waits)
			break
		}
	}
	if waits[0] >= waits[len(waits)-1] {
		t.Errorf("waits %v: want backoff", waits)
	}
	if n := w.count(); n != 1 {
		t.Errorf("%d warnings (%v), want one for the streak", n, w.msgs)
	}
}

// The caller's context bounds the retries; the error says both.
func TestAcquireUnreachableEndsWithTheContext(t *testing.T) {
	_, hs := newMem()
	hs.setHooks(func(op, key string) error {
		return providers.Wrap(op, key, providers.ErrUnreachable, errors.New("connection refused"))
	}, nil)
	clk := clock.NewFake(epoch)
	c := newClient(t, hs, "a", clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := c.Acquire(ctx); done <- err }()
	for range 3 {
		waitTimers(t, clk, 1)
		next, _ := clk.NextDeadline()
		clk.Advance(next.Sub(clk.Now()))
	}
	waitTimers(t, clk, 1)
	cancel()
	err := result(t, func() error { return <-done })
	if !errors.Is(err, providers.ErrUnreachable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire: %v, want the context's end and ErrUnreachable", err)
	}
}

// A context that ends during the first attempt gets that attempt only.
func TestAcquireWithAnExpiringContextTriesOnce(t *testing.T) {
	_, hs := newMem()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hs.setHooks(func(op, key string) error {
		cancel() // the deadline passes while the request is out
		return providers.Wrap(op, key, providers.ErrUnreachable, errors.New("connection refused"))
	}, nil)
	c := newClient(t, hs, "a", clock.NewFake(epoch))
	err := result(t, func() error { _, err := c.Acquire(ctx); return err })
	if !errors.Is(err, providers.ErrUnreachable) || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("acquire: %v", err)
	}
	if n := hs.requests(); n["create"] != 1 || len(n) != 1 {
		t.Errorf("requests %v, want one create", n)
	}
}
