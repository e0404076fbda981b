package objlease_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
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
	c := newClient(t, hs, "a", clk, func(o *objlease.Options) {
		o.TTL = 10 * time.Minute // survives the failing minute
		o.Logger = slog.New(logs)
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
