package objlease_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers/mem"
)

// budgetEnv is one budget case's world: a mem store whose clock (for
// Last-Modified and Date) is storeClk, seen through a counting wrapper.
type budgetEnv struct {
	t        *testing.T
	hs       *hookStore
	storeClk *clock.Fake
}

// client returns a client with its own clock (TTL 10 s, renew every 2 s).
func (e *budgetEnv) client(holder string, clk *clock.Fake, mod ...func(*objlease.Options)) *objlease.Client {
	return newClient(e.t, e.hs, holder, clk, mod...)
}

// take acquires with c and releases at the end of the test.
func (e *budgetEnv) take(c *objlease.Client) *objlease.Lease {
	e.t.Helper()
	l, err := c.TryAcquire(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

func (e *budgetEnv) release(l *objlease.Lease) {
	e.t.Helper()
	if err := l.Release(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// poll makes c look at a lease someone else holds.
func (e *budgetEnv) poll(c *objlease.Client) {
	e.t.Helper()
	if _, err := c.TryAcquire(context.Background()); !errors.Is(err, objlease.ErrHeld) {
		e.t.Fatalf("poll: %v, want ErrHeld", err)
	}
}

// TestRoundTripBudget is the request budget of every state change, counted
// with an instrumented store: one conditional write per state change is the
// physical limit, plus one read where the client must first learn the
// record's version.
func TestRoundTripBudget(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		want map[string]int
		// setup prepares the world and returns the operation to count.
		setup func(e *budgetEnv) func() error
	}{
		{"acquire an absent lease", map[string]int{"create": 1}, func(e *budgetEnv) func() error {
			c := e.client("a", clock.NewFake(epoch))
			return func() error { e.take(c); return nil }
		}},
		{"acquire a lease this client released", map[string]int{"replace": 1}, func(e *budgetEnv) func() error {
			c := e.client("a", clock.NewFake(epoch))
			e.release(e.take(c))
			return func() error { e.take(c); return nil }
		}},
		{"take over a released lease after a poll", map[string]int{"get": 1, "replace": 1}, func(e *budgetEnv) func() error {
			a, b := e.client("a", clock.NewFake(epoch)), e.client("b", clock.NewFake(epoch))
			l := e.take(a)
			e.poll(b)
			e.release(l)
			return func() error { e.take(b); return nil }
		}},
		{"take over an expired lease after a poll", map[string]int{"get": 1, "replace": 1}, func(e *budgetEnv) func() error {
			// The holder's clock never moves: it never renews.
			e.take(e.client("dead", clock.NewFake(epoch)))
			clk := clock.NewFake(epoch)
			c := e.client("c", clk)
			e.poll(c)
			clk.Advance(10100 * time.Millisecond) // TTL × (1 + drift)
			return func() error { e.take(c); return nil }
		}},
		// A client that has never looked tries to create first, so that an
		// absent lease costs one request; a released one then costs three.
		{"fresh client takes over a released lease", map[string]int{"create": 1, "get": 1, "replace": 1}, func(e *budgetEnv) func() error {
			e.release(e.take(e.client("a", clock.NewFake(epoch))))
			c := e.client("b", clock.NewFake(epoch))
			return func() error { e.take(c); return nil }
		}},
		{"fresh client takes over a long-dead lease by the store's clock", map[string]int{"create": 1, "get": 1, "replace": 1}, func(e *budgetEnv) func() error {
			e.take(e.client("dead", clock.NewFake(epoch)))
			// Past TTL + granularity + margin (1 s) by the store's clock.
			e.storeClk.Advance(11*time.Second + time.Millisecond)
			c := e.client("fresh", clock.NewFake(epoch), func(o *objlease.Options) { o.StoreClock = true })
			return func() error { e.take(c); return nil }
		}},
		{"poll a held lease", map[string]int{"get": 1}, func(e *budgetEnv) func() error {
			e.take(e.client("a", clock.NewFake(epoch)))
			c := e.client("b", clock.NewFake(epoch))
			e.poll(c)
			return func() error { e.poll(c); return nil }
		}},
		{"renew", map[string]int{"replace": 1}, func(e *budgetEnv) func() error {
			l := e.take(e.client("a", clock.NewFake(epoch)))
			return func() error { return l.Renew(ctx) }
		}},
		{"release", map[string]int{"replace": 1}, func(e *budgetEnv) func() error {
			l := e.take(e.client("a", clock.NewFake(epoch)))
			return func() error { return l.Release(ctx) }
		}},
		{"break", map[string]int{"get": 1, "replace": 1}, func(e *budgetEnv) func() error {
			e.take(e.client("a", clock.NewFake(epoch)))
			c := e.client("b", clock.NewFake(epoch))
			return func() error { _, err := c.Break(ctx); return err }
		}},
		{"fenced put to a new object", map[string]int{"stat": 1, "create": 1}, func(e *budgetEnv) func() error {
			return func() error {
				_, err := fence.Put(ctx, e.hs, "out/report", 3, []byte("v1"), fence.Options{})
				return err
			}
		}},
		{"fenced put over an object", map[string]int{"stat": 1, "replace": 1}, func(e *budgetEnv) func() error {
			if _, err := fence.Put(ctx, e.hs, "out/report", 3, []byte("v1"), fence.Options{}); err != nil {
				e.t.Fatal(err)
			}
			return func() error {
				_, err := fence.Put(ctx, e.hs, "out/report", 4, []byte("v2"), fence.Options{})
				return err
			}
		}},
		{"fenced put, version known", map[string]int{"replace": 1}, func(e *budgetEnv) func() error {
			res, err := fence.Put(ctx, e.hs, "out/report", 3, []byte("v1"), fence.Options{})
			if err != nil {
				e.t.Fatal(err)
			}
			return func() error {
				_, err := fence.Put(ctx, e.hs, "out/report", 3, []byte("v2"), fence.Options{LastVersion: res.Version})
				return err
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storeClk := clock.NewFake(epoch)
			e := &budgetEnv{t: t, hs: newHookStore(mem.New(mem.WithClock(storeClk.Now))), storeClk: storeClk}
			op := tc.setup(e)
			e.hs.requests()
			if err := op(); err != nil {
				t.Fatal(err)
			}
			if got := e.hs.requests(); !maps.Equal(got, tc.want) {
				t.Errorf("requests %v, want %v", got, tc.want)
			}
		})
	}
}
