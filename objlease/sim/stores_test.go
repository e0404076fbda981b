package sim

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/objlease/objlease/providers"
)

// applied is one write the store really applied, in the store's order.
type applied struct {
	at       time.Time
	op       string // create, replace, delete; or the operator's action
	key      string
	version  string
	data     []byte
	metadata map[string]string
}

// gateStore is a process's view of the store. While the process is paused
// none of its requests goes out and no reply comes in; the gate can also
// start a pause at any request, which puts a pause between any check the
// library makes and the write that follows. Once the run is winding down
// (calm) requests bypass the fault injectors so that every lease can be
// released.
type gateStore struct {
	providers.Store // the fault injectors over the audited store
	raw             providers.Store
	p               *proc
	calm            *atomic.Bool
	dead            *atomic.Bool // the process crashed; nil: it cannot
}

func (g *gateStore) crashed() bool { return g.dead != nil && g.dead.Load() }

func (g *gateStore) pick() providers.Store {
	if g.calm.Load() {
		return g.raw
	}
	return g.Store
}

// around runs call between two passes of the gate. A write whose reply
// is held up past its context's end has an unknown outcome.
func (g *gateStore) around(ctx context.Context, op, key string, call func(s providers.Store) error) error {
	if g.crashed() {
		return &providers.Error{Op: op, Key: key, Err: errCrashed}
	}
	g.p.maybePause()
	g.p.maybePauseAfterCheck(op, key)
	if err := g.p.awaitRunning(ctx); err != nil {
		return &providers.Error{Op: op, Key: key, Err: err}
	}
	err := call(g.pick())
	if werr := g.p.awaitRunning(ctx); werr != nil && err == nil {
		if op == "get" || op == "stat" || op == "list" {
			return &providers.Error{Op: op, Key: key, Err: werr}
		}
		return providers.Wrap(op, key, providers.ErrUnknownOutcome, werr)
	}
	return err
}

func (g *gateStore) Get(ctx context.Context, key string, max int64) (o *providers.Object, err error) {
	err = g.around(ctx, "get", key, func(s providers.Store) error { o, err = s.Get(ctx, key, max); return err })
	return o, err
}

func (g *gateStore) Stat(ctx context.Context, key string) (a *providers.Attrs, err error) {
	err = g.around(ctx, "stat", key, func(s providers.Store) error { a, err = s.Stat(ctx, key); return err })
	return a, err
}

func (g *gateStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (r providers.WriteResult, err error) {
	if g.late(ctx, "create", key, func() { _, _ = g.raw.Create(context.Background(), key, data, md) }) {
		return r, providers.Wrap("create", key, providers.ErrUnknownOutcome, errLate)
	}
	err = g.around(ctx, "create", key, func(s providers.Store) error { r, err = s.Create(ctx, key, data, md); return err })
	return r, err
}

func (g *gateStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (r providers.WriteResult, err error) {
	if g.late(ctx, "replace", key, func() { _, _ = g.raw.Replace(context.Background(), key, data, md, v) }) {
		return r, providers.Wrap("replace", key, providers.ErrUnknownOutcome, errLate)
	}
	err = g.around(ctx, "replace", key, func(s providers.Store) error { r, err = s.Replace(ctx, key, data, md, v); return err })
	return r, err
}

var errLate = errors.New("request timed out on its way; it reaches the store later")

// late decides, with chance lateWrites, that a write is held up on its
// way to the store: its caller times out and sees an unknown outcome
// first, and the write reaches the store after that, when the caller may
// have retried. It reports whether it did; apply is the write.
func (g *gateStore) late(ctx context.Context, op, key string, apply func()) bool {
	p := g.p
	if g.calm.Load() || g.crashed() {
		return false
	}
	p.mu.Lock()
	hit := p.gateRnd.Float64() < p.w.cfg.lateWrites
	timeout := 100*time.Millisecond + time.Duration(p.gateRnd.Int64N(int64(time.Second)))
	arrive := timeout + 1 + time.Duration(p.gateRnd.Int64N(int64(2*time.Second)))
	p.mu.Unlock()
	if !hit {
		return false
	}
	if err := p.awaitRunning(ctx); err != nil {
		return false
	}
	p.w.count("late write")
	p.w.late.Go(func() {
		time.Sleep(arrive)
		apply()
	})
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return true
}

func (g *gateStore) Delete(ctx context.Context, key, v string) error {
	return g.around(ctx, "delete", key, func(s providers.Store) error { return s.Delete(ctx, key, v) })
}

func (g *gateStore) List(ctx context.Context, prefix, token string, n int) (p providers.ListPage, err error) {
	err = g.around(ctx, "list", prefix, func(s providers.Store) error { p, err = s.List(ctx, prefix, token, n); return err })
	return p, err
}
