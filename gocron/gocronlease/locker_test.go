package gocronlease_test

// The Locker and Elector called directly, as gocron calls them, on the
// in-memory store with the store's clock set by the test.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/objlease/objlease/gocron/gocronlease"
	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/tick"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// waitLong bounds each wait for something to happen at all, on a loaded
// machine; the assertions are on counts and order.
const waitLong = 60 * time.Second

// storeClock is the time the in-memory store stamps on its writes.
type storeClock struct{ ns atomic.Int64 }

func (c *storeClock) set(t time.Time)        { c.ns.Store(t.UnixNano()) }
func (c *storeClock) now() time.Time         { return time.Unix(0, c.ns.Load()).UTC() }
func at(s string) time.Time                  { t, _ := time.Parse(time.RFC3339, s); return t }
func newMem(c *storeClock) *providers.Bucket { return mem.New(mem.WithClock(c.now)) }

func newLocker(t *testing.T, store providers.Store, holder string, cfg gocronlease.LockerConfig) *gocronlease.Locker {
	t.Helper()
	l, err := gocronlease.NewLocker(store, objlease.SessionOptions{}, objlease.Options{TTL: 3 * time.Second, Holder: holder}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	return l
}

// runJob calls the Locker's task for ctx and returns what the job saw.
func runJob(t *testing.T, l *gocronlease.Locker, ctx context.Context) (token uint64, tk string, err error) {
	t.Helper()
	err = l.Wrap(func(ctx context.Context) error {
		token, _ = gocronlease.TokenFrom(ctx)
		tk, _ = gocronlease.TickFrom(ctx)
		if lease := gocronlease.LeaseFrom(ctx); lease == nil || lease.Token() != token {
			t.Errorf("LeaseFrom: %v, token %d", lease, token)
		}
		return nil
	})(ctx)
	return token, tk, err
}

// A fast job's lock is given back before the other scheduler's trigger of
// the same tick: that trigger finds the tick done. The next tick runs,
// under a higher token.
func TestLockerTickDone(t *testing.T) {
	var clk storeClock
	clk.set(at("2026-12-07T10:00:10Z"))
	store := newMem(&clk)
	cfg := gocronlease.LockerConfig{Prefix: "jobs/", Period: time.Minute}
	a, b := newLocker(t, store, "a", cfg), newLocker(t, store, "b", cfg)
	// gocron's job contexts, one per scheduler.
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()

	la, err := a.Lock(ctxA, "report")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lock(ctxA, "report"); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("a second Lock on the same scheduler while its run holds the lease: %v, want ErrHeld", err)
	}
	if _, err := b.Lock(ctxB, "report"); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("Lock on the other scheduler during the run: %v, want ErrHeld", err)
	}
	token, tk, err := runJob(t, a, ctxA)
	if err != nil || token == 0 || tk != "2026-12-07T10:00:00Z/PT1M" {
		t.Fatalf("the job saw token %d, tick %q, err %v", token, tk, err)
	}
	if err := la.Unlock(ctxA); err != nil {
		t.Fatal(err)
	}
	clk.set(at("2026-12-07T10:00:40Z"))
	if _, err := b.Lock(ctxB, "report"); !errors.Is(err, gocronlease.ErrTickDone) {
		t.Fatalf("Lock on the other scheduler after the run, same tick: %v, want ErrTickDone", err)
	}
	if _, err := a.Lock(ctxA, "report"); !errors.Is(err, gocronlease.ErrTickDone) {
		t.Fatalf("Lock again after the run, same tick: %v, want ErrTickDone", err)
	}
	if _, _, err := runJob(t, a, ctxA); !errors.Is(err, gocronlease.ErrNoLease) {
		t.Fatalf("the task without a lock: %v, want ErrNoLease", err)
	}

	clk.set(at("2026-12-07T10:01:02Z"))
	lb, err := b.Lock(ctxB, "report")
	if err != nil {
		t.Fatal(err)
	}
	token2, tk2, err := runJob(t, b, ctxB)
	if err != nil || token2 <= token || tk2 != "2026-12-07T10:01:00Z/PT1M" {
		t.Fatalf("next tick: the job saw token %d (after %d), tick %q, err %v", token2, token, tk2, err)
	}
	if err := lb.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	marks, err := tick.Read(context.Background(), store, "jobs/report")
	if err != nil {
		t.Fatal(err)
	}
	if m := marks.Find(tk); m == nil || m.Token != token || m.Holder != "a" {
		t.Errorf("mark of %s: %+v", tk, m)
	}
	if m := marks.Find(tk2); m == nil || m.Token != token2 || m.Holder != "b" {
		t.Errorf("mark of %s: %+v", tk2, m)
	}
}

// A job without a period is only kept from running twice at once.
func TestLockerNoPeriod(t *testing.T) {
	var clk storeClock
	clk.set(at("2026-12-07T10:00:10Z"))
	store := newMem(&clk)
	l := newLocker(t, store, "a", gocronlease.LockerConfig{Period: time.Minute, Periods: map[string]time.Duration{"adhoc": 0}})
	ctx := context.Background()
	var last uint64
	for range 2 {
		k, err := l.Lock(ctx, "adhoc")
		if err != nil {
			t.Fatal(err)
		}
		token, tk, err := runJob(t, l, ctx)
		if err != nil || token <= last || tk != "" {
			t.Fatalf("the job saw token %d (after %d), tick %q, err %v", token, last, tk, err)
		}
		last = token
		if err := k.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A run whose lease is lost sees its context end; Unlock says the tick
// stays open, and the next trigger of the same tick runs it, under a
// higher token.
func TestLockerLeaseLostLeavesTickOpen(t *testing.T) {
	var clk storeClock
	clk.set(at("2026-12-07T10:00:10Z"))
	store := newMem(&clk)
	cfg := gocronlease.LockerConfig{Prefix: "jobs/", Period: time.Minute}
	a := newLocker(t, store, "a", cfg)
	ctx := context.Background()
	k, err := a.Lock(ctx, "report")
	if err != nil {
		t.Fatal(err)
	}
	var token uint64
	err = a.Wrap(func(ctx context.Context) error {
		token, _ = gocronlease.TokenFrom(ctx)
		breaker, err := objlease.New(store, "jobs/report", objlease.Options{})
		if err != nil {
			return err
		}
		if _, err := breaker.Break(context.Background()); err != nil {
			return err
		}
		select { // the next renewal finds the record broken
		case <-ctx.Done():
		case <-time.After(time.Minute):
			t.Error("the job's context did not end after its lease was broken")
		}
		return context.Cause(ctx)
	})(ctx)
	if !errors.Is(err, objlease.ErrLeaseLost) {
		t.Fatalf("the job's context ended with %v, want ErrLeaseLost", err)
	}
	if err := k.Unlock(ctx); !errors.Is(err, objlease.ErrLeaseLost) {
		t.Fatalf("Unlock after the lease was lost: %v, want ErrLeaseLost", err)
	}
	b := newLocker(t, store, "b", cfg)
	kb, err := b.Lock(ctx, "report")
	if err != nil {
		t.Fatalf("the tick whose run lost its lease: %v, want it open", err)
	}
	token2, _, err := runJob(t, b, ctx)
	if err != nil || token2 <= token+1 { // above the break's token too
		t.Fatalf("the tick's second run saw token %d (first %d), err %v", token2, token, err)
	}
	if err := kb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNewLockerRefusesNegativePeriods(t *testing.T) {
	store := mem.New()
	for _, cfg := range []gocronlease.LockerConfig{{Period: -time.Second}, {Periods: map[string]time.Duration{"x": -1}}} {
		if _, err := gocronlease.NewLocker(store, objlease.SessionOptions{}, objlease.Options{}, cfg); !errors.Is(err, objlease.ErrInvalidOptions) {
			t.Errorf("%+v: %v, want ErrInvalidOptions", cfg, err)
		}
	}
	if _, err := gocronlease.NewLocker(store, objlease.SessionOptions{}, objlease.Options{TTL: time.Nanosecond}, gocronlease.LockerConfig{}); !errors.Is(err, objlease.ErrInvalidOptions) {
		t.Errorf("a TTL of 1 ns: %v, want ErrInvalidOptions", err)
	}
}

// One of two Electors leads; IsLeader says so on it alone; closed, it
// releases and the other leads under a higher token.
func TestElectorCloseHandsOver(t *testing.T) {
	store := mem.New()
	ctx := context.Background()
	opts := func(h string) objlease.Options { return objlease.Options{TTL: 300 * time.Millisecond, Holder: h} }
	a, err := gocronlease.NewElector(ctx, store, objlease.SessionOptions{}, "leader", opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	waitLeader := func(e *gocronlease.Elector) {
		t.Helper()
		deadline := time.Now().Add(waitLong)
		for e.IsLeader(ctx) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("not leading within %v: %v", waitLong, e.IsLeader(ctx))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitLeader(a)
	b, err := gocronlease.NewElector(ctx, store, objlease.SessionOptions{}, "leader", opts("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if err := b.IsLeader(ctx); !errors.Is(err, gocronlease.ErrNotLeader) || b.Token() != 0 {
		t.Fatalf("b while a leads: %v, token %d", err, b.Token())
	}
	if err := b.Wrap(func(context.Context) error { t.Error("b ran a job while a leads"); return nil })(ctx); !errors.Is(err, gocronlease.ErrNotLeader) {
		t.Fatalf("b's task while a leads: %v", err)
	}
	first := a.Token()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.IsLeader(ctx); !errors.Is(err, gocronlease.ErrNotLeader) {
		t.Fatalf("a after Close: %v", err)
	}
	waitLeader(b)
	var seen uint64
	if err := b.Wrap(func(ctx context.Context) error { seen, _ = gocronlease.TokenFrom(ctx); return nil })(ctx); err != nil {
		t.Fatal(err)
	}
	if seen <= first || seen != b.Token() {
		t.Fatalf("b's job saw token %d (b says %d), a's was %d", seen, b.Token(), first)
	}
}

// The Elector logs through the logger of the SessionOptions it was given.
func TestElectorLogsToItsSessionLogger(t *testing.T) {
	var logs syncBuffer
	ctx := context.Background()
	e, err := gocronlease.NewElector(ctx, mem.New(), objlease.SessionOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		"leader", objlease.Options{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	deadline := time.Now().Add(waitLong)
	for !strings.Contains(logs.String(), "gocronlease: leading") {
		if time.Now().After(deadline) {
			t.Fatalf("nothing logged within %v; logs: %q", waitLong, logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
