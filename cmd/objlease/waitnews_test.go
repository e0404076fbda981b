package main

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
)

// A waiter says who holds the lease once, and again only when that changes:
// another holder or token, or a takeover time that moves both on the clock
// and in how long is left (the holder stopped renewing, or changed its TTL).
// A live holder's renewals (the time moves, the wait stays) and the
// passing of time beside a dead one (the wait shrinks, the time stays) are
// not news, however many polls there are.
func TestWaitNewsOnlyOnChange(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ttl = 30 * time.Second
	const r = ttl / 3
	held := func(holder string, token uint64, now time.Time, wait time.Duration) objlease.Progress {
		return objlease.Progress{Held: &objlease.Error{Key: "k", Err: objlease.ErrHeld, Record: &objlease.Record{Holder: holder, Token: token}, Wait: wait}, Takeover: now.Add(wait)}
	}
	var n waitNews
	lines := 0
	step := func(p objlease.Progress) {
		if n.changed(p, ttl) {
			lines++
		}
	}
	now := t0
	// A live holder: 100 polls, one after each renewal.
	for range 100 {
		step(held("alice", 1, now, ttl+ttl/100))
		now = now.Add(r)
	}
	if lines != 1 {
		t.Fatalf("live holder: %d lines over 100 polls, want 1", lines)
	}
	// It stops renewing: said once, then the countdown is not news.
	last := now.Add(-r)
	for i := range 3 {
		step(held("alice", 1, now, ttl+ttl/100-time.Duration(i+1)*r))
		now = now.Add(r)
	}
	_ = last
	if lines != 2 {
		t.Fatalf("holder stopped renewing: %d lines, want 2", lines)
	}
	// A new holder, and a new token, are news.
	step(held("carol", 2, now, ttl))
	step(held("carol", 3, now, ttl))
	if lines != 4 {
		t.Fatalf("new holder and token: %d lines, want 4", lines)
	}
	// A store failure between polls is not news about the holder.
	step(objlease.Progress{Err: errNotAcquired})
	step(held("carol", 3, now, ttl))
	if lines != 4 {
		t.Fatalf("after a store failure: %d lines, want 4", lines)
	}
}

// A wait that its own -w or --timeout ends cuts the attempt in flight
// short; that attempt's error is no store failure, so the wait ends as
// "held" (75), not "store unreachable" (69). Under load this happened
// whenever the deadline fell during a read.
func TestWaitCutByItsTimeoutEndsAsHeld(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	w := &waiting{ctx: ctx, c: &cli{stderr: io.Discard}, ttl: time.Second, say: func(*objlease.Error, bool) {}}
	w.progress(objlease.Progress{Held: &objlease.Error{Key: "k", Err: objlease.ErrHeld, Record: &objlease.Record{Holder: "alice", Token: 1}, Wait: time.Second}, Takeover: time.Now().Add(time.Second)})
	cancel(fmt.Errorf("%w within -w 1s", errNotAcquired))
	w.progress(objlease.Progress{Err: fmt.Errorf("read \"k\": %w", context.Canceled)})
	if code := exitCodeOf(waitEnded(ctx, w.last, w.storeErr)); code != exitHeld {
		t.Fatalf("exit %d, want %d (held)", code, exitHeld)
	}
}
