package objlease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
)

func readRecord(t *testing.T, s providers.Store) *objlease.Record {
	t.Helper()
	obj, err := s.Get(context.Background(), "jobs/nightly", 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := objlease.DecodeRecord("jobs/nightly", obj.Data)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestAcquireAbsentIsOneWrite(t *testing.T) {
	ctx := context.Background()
	_, hs := newMem()
	c := newClient(t, hs, "a", clock.NewFake(epoch))
	l, err := c.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if l.Token() != 1 {
		t.Fatalf("token %d, want 1", l.Token())
	}
	if got := hs.requests(); got["create"] != 1 || len(got) != 1 {
		t.Fatalf("requests %v, want exactly one create", got)
	}
}

func TestReleaseKeepsTokenAndNextIsHigher(t *testing.T) {
	ctx := context.Background()
	_, hs := newMem()
	clk := clock.NewFake(epoch)
	a := newClient(t, hs, "a", clk)
	b := newClient(t, hs, "b", clk)
	var last uint64
	for i := range 6 {
		c := a
		if i%2 == 1 {
			c = b
		}
		l, err := c.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if l.Token() <= last {
			t.Fatalf("round %d: token %d not above %d", i, l.Token(), last)
		}
		last = l.Token()
		hs.requests()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if got := hs.requests(); got["replace"] != 1 || len(got) != 1 {
			t.Fatalf("release cost %v, want one replace", got)
		}
		rec := readRecord(t, hs)
		if rec.State != objlease.StateReleased || rec.Token != last {
			t.Fatalf("after release: state %s token %d, want released %d (the record is kept)", rec.State, rec.Token, last)
		}
		if !errors.Is(context.Cause(l.Context()), objlease.ErrReleased) {
			t.Fatalf("cause %v, want ErrReleased", context.Cause(l.Context()))
		}
	}
	// The client that released last takes it back with one write.
	hs.requests()
	l, err := b.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := hs.requests(); got["replace"] != 1 || len(got) != 1 {
		t.Fatalf("re-acquire cost %v, want one replace", got)
	}
	l.Release(ctx)
}

func TestRenewIsOneWriteAndExtendsValidity(t *testing.T) {
	ctx := context.Background()
	_, hs := newMem()
	clk := clock.NewFake(epoch)
	c := newClient(t, hs, "a", clk)
	l, err := c.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	// TTL 10 s, drift 1 %: safe validity 9.9 s from the send time, less the
	// 100 ms allowance for a late end: 9.8 s.
	if v := l.ValidFor(); v != 9800*time.Millisecond {
		t.Fatalf("ValidFor %v, want 9.8s", v)
	}
	hs.requests()
	clk.Advance(time.Second)
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if got := hs.requests(); got["replace"] != 1 || len(got) != 1 {
		t.Fatalf("renew cost %v, want exactly one replace and no read", got)
	}
	if v := l.ValidFor(); v != 9800*time.Millisecond {
		t.Fatalf("ValidFor after renew %v, want 9.8s", v)
	}
	if rec := readRecord(t, hs); rec.Renewals != 1 || rec.Token != 1 {
		t.Fatalf("record after renew: %+v", rec)
	}
}

func TestBackgroundRenewalKeepsLeaseForever(t *testing.T) {
	ctx := context.Background()
	_, hs := newMem()
	clk := clock.NewFake(epoch)
	c := newClient(t, hs, "a", clk)
	l, err := c.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	for i := 1; i <= 50; i++ {
		waitTimers(t, clk, 2)
		clk.Advance(2 * time.Second)
		eventually(t, "renewal", func() bool { return readRecord(t, hs).Renewals == uint64(i) })
	}
	if l.Err() != nil || l.ValidFor() <= 0 {
		t.Fatalf("lease lost after 100 s of renewals: %v", l.Err())
	}
}

// The holder's context must end before any contender, whose clock may run
// fast by the drift bound, could take over.
func TestLostBeforeTakeoverPossible(t *testing.T) {
	ctx := context.Background()
	m, _ := newMem()
	// The holder sees the store through a wrapper that refuses its renewals.
	hs := newHookStore(m)
	hclk := clock.NewFake(epoch)
	// The contender's clock reads a different time altogether: only
	// durations matter.
	cclk := clock.NewFake(epoch.Add(-1000 * time.Hour))
	holder := newClient(t, hs, "holder", hclk)
	contender := newClient(t, m, "contender", cclk)
	l, err := holder.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hs.setHooks(func(op, key string) error {
		if op == "replace" {
			return providers.Wrap(op, key, providers.ErrThrottled, nil)
		}
		return nil
	}, nil)
	// Worst-case drift: the holder's clock runs slow by 1 %, the
	// contender's fast by 1 %. Step real time in 10 ms.
	const step = 10 * time.Millisecond
	var lostAt, takenAt time.Duration
	for real := time.Duration(0); real < 30*time.Second && takenAt == 0; real += step {
		hclk.Advance(time.Duration(float64(step) * 0.99))
		cclk.Advance(time.Duration(float64(step) * 1.01))
		// Let the holder's goroutines act on the time that has passed.
		eventually(t, "holder goroutines asleep", func() bool { return hclk.Timers() == 2 || l.Err() != nil })
		if lostAt == 0 && l.Err() != nil {
			lostAt = real
		}
		if l2, err := contender.TryAcquire(ctx); err == nil {
			takenAt = real
			if l2.Token() != 2 {
				t.Fatalf("takeover token %d, want 2", l2.Token())
			}
			defer l2.Release(ctx)
		} else if !errors.Is(err, objlease.ErrHeld) {
			t.Fatal(err)
		}
	}
	if lostAt == 0 || takenAt == 0 {
		t.Fatalf("lostAt %v takenAt %v", lostAt, takenAt)
	}
	if lostAt >= takenAt {
		t.Fatalf("holder lost its lease at %v, not before the contender took over at %v", lostAt, takenAt)
	}
	if !errors.Is(context.Cause(l.Context()), objlease.ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", context.Cause(l.Context()))
	}
	t.Logf("real time: holder lost at %v, contender took over at %v (TTL 10 s, drift bound 1 %%)", lostAt, takenAt)
}

func TestTakeoverCostsReadAndWrite(t *testing.T) {
	ctx := context.Background()
	_, hs := newMem()
	// A holder whose clock never moves is a process frozen for good: it
	// never renews.
	dead := newClient(t, hs, "dead", clock.NewFake(epoch))
	if _, err := dead.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(epoch)
	c := newClient(t, hs, "c", clk)
	if _, err := c.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("%v, want ErrHeld", err)
	}
	hs.requests()
	clk.Advance(5 * time.Second)
	var he *objlease.Error
	if _, err := c.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) || !errors.As(err, &he) {
		t.Fatalf("%v, want an *Error (ErrHeld)", err)
	}
	if he.Record.Holder != "dead" || he.Record.Token != 1 || he.Wait != 5100*time.Millisecond {
		t.Fatalf("held %+v, want holder dead, token 1, wait 5.1s", he)
	}
	if got := hs.requests(); got["get"] != 1 || len(got) != 1 {
		t.Fatalf("a poll cost %v, want one read", got)
	}
	clk.Advance(he.Wait - time.Millisecond)
	if _, err := c.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("1 ms before TTL × (1 + drift): %v, want ErrHeld", err)
	}
	hs.requests()
	clk.Advance(time.Millisecond)
	l, err := c.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if l.Token() != 2 {
		t.Fatalf("token %d, want 2", l.Token())
	}
	if got := hs.requests(); got["get"] != 1 || got["replace"] != 1 || len(got) != 2 {
		t.Fatalf("takeover cost %v, want one read and one write", got)
	}
}
