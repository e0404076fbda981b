package objlease_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// countingHandler keeps the messages logged.
type countingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func (h *countingHandler) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// A holder whose renewals keep failing says so once, then at most once per
// max(RenewInterval, 10 s) that they are still failing, and once that they
// succeed again: not once per retry (every RenewInterval/4).
func TestRenewalWarningsAreRateLimited(t *testing.T) {
	ctx := context.Background()
	_, hs := newMem()
	clk := clock.NewFake(epoch)
	logs := &countingHandler{}
	c := newClientOn(t, hs, "a", objlease.SessionOptions{Clock: clk, Logger: slog.New(logs)}, func(o *objlease.Options) {
		o.TTL = 10 * time.Minute // survives the failing minute
	})
	l, err := c.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	var failing sync.Mutex
	fail := true
	hs.setHooks(func(op, key string) error {
		failing.Lock()
		defer failing.Unlock()
		if op == "replace" && fail {
			return providers.Wrap(op, key, providers.ErrThrottled, nil)
		}
		return nil
	}, nil)
	// A minute of failures: retries every 0.5 s, about 120 of them.
	step := func(d time.Duration) {
		for end := clk.Now().Add(d); clk.Now().Before(end); {
			waitTimers(t, clk, 2)
			clk.Advance(100 * time.Millisecond)
		}
		waitTimers(t, clk, 2)
	}
	step(time.Minute)
	attempts := hs.requests()["replace"]
	if attempts < 100 {
		t.Fatalf("%d renewal attempts in a failing minute, want about 120", attempts)
	}
	first, still := logs.count("renewal failed"), logs.count("renewal still failing")
	if first != 1 || still < 4 || still > 6 {
		t.Fatalf("over %d failed renewals: %d first-failure lines and %d still-failing lines, want 1 and 5 (one per 10 s): %q",
			attempts, first, still, logs.msgs)
	}
	failing.Lock()
	fail = false
	failing.Unlock()
	step(10 * time.Second)
	if n := logs.count("renewal succeeded again"); n != 1 {
		t.Fatalf("%d recovery lines, want 1: %q", n, logs.msgs)
	}
	if l.Err() != nil {
		t.Fatal(l.Err())
	}
}

// stalledStore is a store whose first replaces (renewals) hang until their
// request is cancelled, and then answer only when the test lets them, as a
// store's late reply does: with an error that is not a refusal.
type stalledStore struct {
	providers.Store
	stall  atomic.Int32 // how many more replaces stall
	stuck  atomic.Int32 // replaces stalled so far
	answer chan struct{}
}

func (s *stalledStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	if s.stall.Add(-1) < 0 {
		return s.Store.Replace(ctx, key, data, md, v)
	}
	s.stuck.Add(1)
	<-ctx.Done()
	<-s.answer
	return providers.WriteResult{}, providers.Wrap("replace", key, providers.ErrUnknownOutcome, ctx.Err())
}

// A lease that has ended says nothing more about retrying its renewal: the
// renewal in flight when the lease was lost (its validity ran out while the
// store did not answer) or released answers after the end, and used to be
// warned about as "renewal failed; retrying" after the "lease lost" line.
func TestEndedLeaseWarnsNoMoreRetries(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, clk *clock.Fake, l *objlease.Lease)
		last string // the last line
	}{
		{"lost", func(t *testing.T, clk *clock.Fake, l *objlease.Lease) {
			step(clk, 12*time.Second, nil) // validity: 10 s × 0.99 − 100 ms
			if !errors.Is(l.Err(), objlease.ErrLeaseLost) {
				t.Fatalf("the lease did not end with its validity: %v", l.Err())
			}
		}, "lease lost"},
		{"released", func(t *testing.T, clk *clock.Fake, l *objlease.Lease) {
			go l.Release(context.Background())
			synctest.Wait()
		}, "lease released"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := clock.NewFake(epoch)
				logs := &countingHandler{}
				store := &stalledStore{Store: mem.New(), answer: make(chan struct{})}
				store.stall.Store(1)
				c := newClientOn(t, store, "a", objlease.SessionOptions{Clock: clk, Logger: slog.New(logs)})
				l, err := c.TryAcquire(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				step(clk, 3*time.Second, nil) // the first renewal (within 2 s) is sent, and hangs
				if store.stuck.Load() != 1 {
					t.Fatalf("%d renewals stalled, want 1", store.stuck.Load())
				}
				tc.end(t, clk, l)
				close(store.answer) // the stalled renewal's reply comes at last
				synctest.Wait()
				logs.mu.Lock()
				msgs := slices.Clone(logs.msgs)
				logs.mu.Unlock()
				for _, m := range msgs {
					if strings.HasPrefix(m, "renewal") {
						t.Fatalf("a renewal warning after the lease ended: %q", msgs)
					}
				}
				if len(msgs) == 0 || msgs[len(msgs)-1] != tc.last {
					t.Fatalf("lines %q, want %q last", msgs, tc.last)
				}
			})
		})
	}
}
