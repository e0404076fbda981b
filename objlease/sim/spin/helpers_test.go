package spin_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

const key = "jobs/nightly"

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// hooks wraps a store; before runs instead of a request when it returns an
// error, after sees the request's outcome and may replace it. Each hook
// runs once, for the first request of its operation.
type hooks struct {
	providers.Store
	mu     sync.Mutex
	before map[string]func() error
	after  map[string]func(err error) error
	// beforeReplace, if set, runs before every replace, with its data.
	beforeReplace func(data []byte)
}

func newHooks(s providers.Store) *hooks {
	return &hooks{Store: s, before: map[string]func() error{}, after: map[string]func(error) error{}}
}

func (h *hooks) take(op string) (func() error, func(error) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, a := h.before[op], h.after[op]
	delete(h.before, op)
	delete(h.after, op)
	return b, a
}

func (h *hooks) do(op string, call func() error) error {
	b, a := h.take(op)
	if b != nil {
		if err := b(); err != nil {
			return err
		}
	}
	err := call()
	if a != nil {
		return a(err)
	}
	return err
}

func (h *hooks) Stat(ctx context.Context, k string) (a *providers.Attrs, err error) {
	err = h.do("stat", func() error { a, err = h.Store.Stat(ctx, k); return err })
	return a, err
}

func (h *hooks) Create(ctx context.Context, k string, d []byte, md map[string]string) (r providers.WriteResult, err error) {
	err = h.do("create", func() error { r, err = h.Store.Create(ctx, k, d, md); return err })
	return r, err
}

func (h *hooks) Replace(ctx context.Context, k string, d []byte, md map[string]string, v string) (r providers.WriteResult, err error) {
	if h.beforeReplace != nil {
		h.beforeReplace(d)
	}
	err = h.do("replace", func() error { r, err = h.Store.Replace(ctx, k, d, md, v); return err })
	return r, err
}

func (h *hooks) Delete(ctx context.Context, k, v string) error {
	return h.do("delete", func() error { return h.Store.Delete(ctx, k, v) })
}

// newClient returns a client of key on s, on a session of its own on clk,
// whose options mod may change.
func newClient(t *testing.T, s providers.Store, holder string, clk clock.Clock, mod ...func(*objlease.SessionOptions)) *objlease.Client {
	t.Helper()
	so := objlease.SessionOptions{Clock: clk}
	for _, m := range mod {
		m(&so)
	}
	sess, err := objlease.NewSession(s, so)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sess.Client(key, objlease.Options{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, Holder: holder})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
