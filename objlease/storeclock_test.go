package objlease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers/mem"
)

// storeClock is the store's own clock, independent of every client's.
type storeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (s *storeClock) Now() time.Time { s.mu.Lock(); defer s.mu.Unlock(); return s.now }
func (s *storeClock) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
}

func TestStoreClockFastTakeover(t *testing.T) {
	ctx := context.Background()
	sc := &storeClock{now: time.Date(2030, 5, 5, 0, 0, 0, 0, time.UTC)}
	hs := newHookStore(mem.New(mem.WithClock(sc.Now)))
	dead := newClient(t, hs, "dead", clock.NewFake(epoch))
	if _, err := dead.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	rule := func(o *objlease.Options) { o.StoreClock, o.StoreClockMargin = true, time.Second }

	// Young record: even with the rule, a fresh client must wait.
	sc.Advance(5 * time.Second)
	fresh := newClient(t, hs, "fresh", clock.NewFake(epoch), rule)
	var he *objlease.Error
	if _, err := fresh.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) {
		t.Fatalf("%v, want held", err)
	}
	// TTL 10 s + granularity 1 ns + margin 1 s - 5 s of age.
	if want := 6*time.Second + time.Nanosecond; he.Wait != want {
		t.Fatalf("wait %v, want %v", he.Wait, want)
	}

	// The dead holder's record is old by the store's clock: with the rule,
	// a fresh process takes over at once, in three requests.
	sc.Advance(time.Hour)
	hs.requests()
	fast := newClient(t, hs, "fast", clock.NewFake(epoch), rule)
	l, err := fast.TryAcquire(ctx)
	if err != nil {
		t.Fatalf("fast takeover: %v", err)
	}
	if got := hs.requests(); got["create"]+got["get"]+got["replace"] != 3 || len(got) != 3 {
		t.Fatalf("fast takeover cost %v, want create + get + replace", got)
	}
	if l.Token() != 2 {
		t.Fatalf("token %d", l.Token())
	}
	l.Release(ctx)

	// Without the rule, the same situation waits a full TTL × (1 + drift).
	if _, err := dead.Break(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(t, hs, "dead2", clock.NewFake(epoch)).TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	sc.Advance(time.Hour)
	slow := newClient(t, hs, "slow", clock.NewFake(epoch))
	if _, err := slow.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) || he.Wait != 10100*time.Millisecond {
		t.Fatalf("%v, want held for 10.1 s without the store-clock rule", err)
	}
}

// A store whose Date lies centuries from the record's Last-Modified tells
// nothing about the record's age: the store-clock rule must not take over
// (the age arithmetic once wrapped around, and the record of a holder with
// 29.7 s left counted as expired at once); the observed-time rule decides.
func TestStoreClockAbsurdSkewTakesNothingOver(t *testing.T) {
	ctx := context.Background()
	rule := func(o *objlease.Options) { o.StoreClock, o.StoreClockMargin = true, time.Second }
	start := time.Date(2030, 5, 5, 0, 0, 0, 0, time.UTC)
	for _, skewed := range []time.Time{start.AddDate(-300, 0, 0), start.Add(-2 * time.Second), start.AddDate(300, 0, 0), start.AddDate(50, 0, 0)} {
		skew := skewed.Sub(start) // saturates: for the message only
		sc := &storeClock{now: start}
		store := mem.New(mem.WithClock(sc.Now))
		holder := newClient(t, store, "holder", clock.NewFake(epoch), func(o *objlease.Options) { o.TTL = 30 * time.Second })
		l, err := holder.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sc.mu.Lock()
		sc.now = skewed
		sc.mu.Unlock()
		var he *objlease.Error
		contender := newClient(t, store, "contender", clock.NewFake(epoch), rule, func(o *objlease.Options) { o.TTL = 30 * time.Second })
		if _, err := contender.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) || he.Wait != 30300*time.Millisecond {
			t.Errorf("store Date %v (%v from Last-Modified): %v, want held for the observed-time rule's 30.3 s", skewed, skew, err)
		}
		l.Release(ctx)
	}
}
