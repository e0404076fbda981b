package objlease_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// hookStore wraps a store, counts requests by operation, and lets a test
// replace the outcome of any request: before runs instead of the request
// when it returns an error; after sees the real outcome and may replace it
// (a lost response is an after hook returning ErrUnknownOutcome).
type hookStore struct {
	providers.Store
	mu     sync.Mutex
	counts map[string]int
	before func(op, key string) error
	after  func(op, key string, err error) error
}

func newHookStore(s providers.Store) *hookStore {
	return &hookStore{Store: s, counts: map[string]int{}}
}

func (h *hookStore) hook(op, key string, do func() error) error {
	h.mu.Lock()
	h.counts[op]++
	before, after := h.before, h.after
	h.mu.Unlock()
	if before != nil {
		if err := before(op, key); err != nil {
			return err
		}
	}
	err := do()
	if after != nil {
		return after(op, key, err)
	}
	return err
}

func (h *hookStore) setHooks(before func(op, key string) error, after func(op, key string, err error) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.before, h.after = before, after
}

// requests returns the request counts so far and resets them.
func (h *hookStore) requests() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.counts
	h.counts = map[string]int{}
	return c
}

func (h *hookStore) Get(ctx context.Context, key string, max int64) (o *providers.Object, err error) {
	err = h.hook("get", key, func() error { o, err = h.Store.Get(ctx, key, max); return err })
	return o, err
}

func (h *hookStore) Stat(ctx context.Context, key string) (a *providers.Attrs, err error) {
	err = h.hook("stat", key, func() error { a, err = h.Store.Stat(ctx, key); return err })
	return a, err
}

func (h *hookStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (r providers.WriteResult, err error) {
	err = h.hook("create", key, func() error { r, err = h.Store.Create(ctx, key, data, md); return err })
	return r, err
}

func (h *hookStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (r providers.WriteResult, err error) {
	err = h.hook("replace", key, func() error { r, err = h.Store.Replace(ctx, key, data, md, v); return err })
	return r, err
}

func (h *hookStore) Delete(ctx context.Context, key, v string) error {
	return h.hook("delete", key, func() error { return h.Store.Delete(ctx, key, v) })
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newClient returns a client on store with a fake clock and test-friendly
// timings (TTL 10 s, renew every 2 s).
func newClient(t *testing.T, store providers.Store, holder string, clk *clock.Fake, mod ...func(*objlease.Options)) *objlease.Client {
	t.Helper()
	return newClientOn(t, store, holder, objlease.SessionOptions{Clock: clk}, mod...)
}

// newClientOn is newClient on a session of its own with so: its clock, and
// a logger or seed of the test's.
func newClientOn(t *testing.T, store providers.Store, holder string, so objlease.SessionOptions, mod ...func(*objlease.Options)) *objlease.Client {
	t.Helper()
	o := objlease.Options{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, Holder: holder}
	for _, m := range mod {
		m(&o)
	}
	c, err := newOn(store, "jobs/nightly", so, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newMem() (*providers.Bucket, *hookStore) {
	m := mem.New()
	return m, newHookStore(m)
}

// eventually waits (briefly, for goroutines woken by a fake clock) until
// cond holds; it fails the test if that takes implausibly long.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitTimers waits until the fake clock has at least n pending timers: the
// background goroutines have gone back to sleep.
func waitTimers(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	eventually(t, "background timers", func() bool { return clk.Timers() >= n })
}
