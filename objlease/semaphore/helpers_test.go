package semaphore_test

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/semaphore"
	"github.com/objlease/objlease/providers"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const prefix = "pools/render"

// newSem returns a semaphore of n slots with a fake clock and test-friendly
// timings (TTL 10 s, renew every 2 s).
func newSem(t *testing.T, store providers.Store, n int, holder string, clk clock.Clock, mod ...func(*objlease.Options)) *semaphore.Semaphore {
	t.Helper()
	o := objlease.Options{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, Holder: holder}
	for _, m := range mod {
		m(&o)
	}
	return newSemOpts(t, store, objlease.SessionOptions{Clock: clk, Rand: rand.New(rand.NewPCG(seed(holder), 1))}, prefix, n, o)
}

// newSemOpts returns a semaphore in a session of its own on store with
// so, closed when the test ends.
func newSemOpts(t *testing.T, store providers.Store, so objlease.SessionOptions, prefix string, n int, o objlease.Options) *semaphore.Semaphore {
	t.Helper()
	sess, err := objlease.NewSession(store, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close(context.Background()) })
	s, err := semaphore.New(sess, prefix, n, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func seed(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
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

// settled waits, in the test's synctest bubble, until every goroutine
// woken by clk is asleep again: the renewal schedulers with no renewal in
// flight, and the contenders between attempts.
func settled(*clock.Fake, int) bool {
	synctest.Wait()
	return true
}

// waitSettled is settled, for a test that need not know.
func waitSettled(t *testing.T, clk *clock.Fake, waiters int) {
	t.Helper()
	settled(clk, waiters)
}

// advance moves clk forward in steps, letting the held slots renew at each
// step.
func advance(t *testing.T, clk *clock.Fake, d, step time.Duration) {
	t.Helper()
	for d > 0 {
		s := min(step, d)
		waitSettled(t, clk, 0)
		clk.Advance(s)
		d -= s
	}
	waitSettled(t, clk, 0)
}

// gate is a store wrapper that can be switched dead: every request then
// fails as throttled, as for a holder cut off from the store.
type gate struct {
	providers.Store
	dead atomic.Bool
}

func (g *gate) check(op, key string) error {
	if g.dead.Load() {
		return providers.Wrap(op, key, providers.ErrThrottled, nil)
	}
	return nil
}

func (g *gate) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	if err := g.check("get", key); err != nil {
		return nil, err
	}
	return g.Store.Get(ctx, key, max)
}

func (g *gate) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	if err := g.check("create", key); err != nil {
		return providers.WriteResult{}, err
	}
	return g.Store.Create(ctx, key, data, md)
}

func (g *gate) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	if err := g.check("replace", key); err != nil {
		return providers.WriteResult{}, err
	}
	return g.Store.Replace(ctx, key, data, md, v)
}

func (g *gate) Delete(ctx context.Context, key, v string) error {
	if err := g.check("delete", key); err != nil {
		return err
	}
	return g.Store.Delete(ctx, key, v)
}

// counter counts requests by operation.
type counter struct {
	providers.Store
	mu sync.Mutex
	n  map[string]int
}

func newCounter(s providers.Store) *counter { return &counter{Store: s, n: map[string]int{}} }

func (c *counter) add(op string) { c.mu.Lock(); c.n[op]++; c.mu.Unlock() }

// take returns the counts so far and resets them.
func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func (c *counter) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	c.add("get")
	return c.Store.Get(ctx, key, max)
}

func (c *counter) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	c.add("create")
	return c.Store.Create(ctx, key, data, md)
}

func (c *counter) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	c.add("replace")
	return c.Store.Replace(ctx, key, data, md, v)
}
