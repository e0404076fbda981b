package objlease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
)

// A renewal refused because the record changed reports the record it found
// in its place, so that the holder can say what happened (broken, taken
// over, released by someone else) rather than only that it changed.
func TestLostLeaseErrorSaysWhatReplacedIt(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, hs *hookStore)
		check  func(t *testing.T, seen *objlease.Record)
		how    string
	}{
		{"broken", func(t *testing.T, hs *hookStore) {
			if _, err := newClient(t, hs, "op", clock.NewFake(epoch), func(o *objlease.Options) { o.Force = true }).Break(ctx); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, seen *objlease.Record) {
			if seen.State != objlease.StateReleased || seen.Holder != "" || seen.Token != 2 {
				t.Fatalf("seen %+v, want released with no holder, token 2", seen)
			}
		}, "broken by an operator, new token 2"},
		{"taken over", func(t *testing.T, hs *hookStore) {
			// Seen unchanged for TTL × (1 + drift) by carol, on a clock of
			// her own (alice's stands still: she does not renew), then taken.
			clk := clock.NewFake(epoch)
			carol := newClient(t, hs, "carol", clk)
			if _, err := carol.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
				t.Fatalf("first look: %v, want ErrHeld", err)
			}
			clk.Advance(11 * time.Second)
			l, err := carol.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Release(ctx) })
		}, func(t *testing.T, seen *objlease.Record) {
			if seen.State != objlease.StateHeld || seen.Holder != "carol" || seen.Token != 2 {
				t.Fatalf("seen %+v, want held by carol, token 2", seen)
			}
		}, "taken over by carol after it expired, new token 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, hs := newMem()
			a := newClient(t, hs, "alice", clock.NewFake(epoch))
			l, err := a.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, hs)
			err = l.Renew(ctx)
			var lost *objlease.Error
			if !errors.Is(err, objlease.ErrLeaseLost) || !errors.As(err, &lost) {
				t.Fatalf("Renew: %v, want an *Error matching ErrLeaseLost", err)
			}
			if lost.Key != "jobs/nightly" || lost.Record == nil || lost.Reason != tc.how {
				t.Fatalf("lost %+v, want key jobs/nightly, the record seen and reason %q", lost, tc.how)
			}
			tc.check(t, lost.Record)
			if !errors.As(l.Err(), &lost) || !strings.HasSuffix(l.Err().Error(), "; "+tc.how) {
				t.Fatalf("Lease.Err %v, want the *Error ending in %q", l.Err(), tc.how)
			}
		})
	}
}

// A lease broken by an operator and then acquired by a waiter is told as
// that, judged by the records: the holder seen carries a token two above
// this lease's, so a token began and ended unseen, and a refusal that
// came while this lease was still valid cannot follow a takeover after
// expiry. It used to say "taken over by bob after it expired": nothing
// expired. Where the validity had ended by the refusal, which of the two
// it was is not said.
func TestLostLeaseBrokenThenAcquired(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		validityEnded bool
		how           string
	}{
		{"within the validity", false, "broken by an operator, new token 2, then acquired by bob, new token 3"},
		{"the validity ended in flight", true, "acquired by bob, new token 3, after token 2 that ended unseen (broken by an operator, or taken over)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, hs := newMem()
			clk := clock.NewFake(epoch)
			l, err := newClient(t, hs, "alice", clk).TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := newClient(t, hs, "op", clock.NewFake(epoch), func(o *objlease.Options) { o.Force = true }).Break(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := newClient(t, hs, "bob", clock.NewFake(epoch)).TryAcquire(ctx); err != nil {
				t.Fatal(err)
			}
			if tc.validityEnded {
				hs.setHooks(nil, func(op, key string, err error) error {
					if op == "replace" {
						clk.Advance(11 * time.Second) // the reply came late
					}
					return err
				})
			}
			err = l.Renew(ctx)
			var lost *objlease.Error
			if !errors.As(err, &lost) || lost.Reason != tc.how {
				t.Fatalf("Renew: %v, want the reason %q", err, tc.how)
			}
		})
	}
}
