package objlease_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// watched is one call of a Watch callback.
type watched struct {
	at time.Duration // since epoch
	st *objlease.Status
}

// watch starts Watch on c and returns its calls so far (read them once
// Watch has returned, or under synctest.Wait) and where its result
// arrives. stop, if not nil, ends it by returning an error.
func watch(ctx context.Context, c *objlease.Client, clk *clock.Fake, stop func(*objlease.Status) error) (*[]watched, <-chan error) {
	var seen []watched
	done := make(chan error, 1)
	go func() {
		done <- c.Watch(ctx, func(st *objlease.Status) error {
			seen = append(seen, watched{clk.Now().Sub(epoch), st})
			if stop != nil {
				return stop(st)
			}
			return nil
		})
	}()
	return &seen, done
}

// A free key is read every PollInterval, less jitter, with no backoff and
// no warning; the callback's error ends the watch and is returned.
func TestWatchFreeKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		var logs strings.Builder
		c, err := newOn(mem.New(), "k", objlease.SessionOptions{Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
			objlease.Options{TTL: 10 * time.Second, PollInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		errEnough := errors.New("enough")
		n := 0
		seen, done := watch(t.Context(), c, clk, func(*objlease.Status) error {
			if n++; n == 20 {
				return errEnough
			}
			return nil
		})
		step(clk, 30*time.Second, nil)
		if err := <-done; !errors.Is(err, errEnough) {
			t.Fatalf("Watch returned %v, want the callback's error", err)
		}
		for i, w := range *seen {
			if w.st.Record != nil || w.st.Version != "" {
				t.Errorf("read %d: %+v, want a free key", i, w.st)
			}
			if i == 0 {
				continue
			}
			// The fake clock moves in steps of 100ms.
			if gap := w.at - (*seen)[i-1].at; gap < 800*time.Millisecond || gap > 1100*time.Millisecond {
				t.Errorf("read %d came %v after the one before, want one PollInterval (1s) less jitter", i, gap)
			}
		}
		if logs.Len() > 0 {
			t.Errorf("logged while nothing was wrong:\n%s", logs.String())
		}
	})
}

// Beside a live holder, Watch reads on the holder's renewal phase once it
// has learned it: just after renewals land, where plain polling reads
// anywhere in the renewal interval. It sees a release within one
// PollInterval. Eight seeded runs, judged together: a holder's renewal
// that lands late makes the watcher learn the phase again.
func TestWatchLiveHolder(t *testing.T) {
	var lags []time.Duration
	for seed := uint64(1); seed <= 8; seed++ {
		lags = append(lags, watchLiveHolder(t, seed)...)
	}
	slices.Sort(lags)
	// Within a few 100 ms steps of the fake clock (R/16 of phase, and the
	// steps): plain polling's median is about 1 s.
	if med := lags[len(lags)/2]; med > 300*time.Millisecond {
		t.Errorf("reads from 20 s to 50 s came %v after the renewal before them (sorted), median %v, want just after renewals", lags, med)
	}
}

// watchLiveHolder runs one seed of TestWatchLiveHolder and returns, for
// each read from 20 s to 50 s, how long after the latest renewal it came.
func watchLiveHolder(t *testing.T, seed uint64) (lags []time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		store := newWriteLog(mem.New(), clk)
		seeded := func(n uint64) objlease.SessionOptions {
			return objlease.SessionOptions{Clock: clk, Rand: rand.New(rand.NewPCG(seed, n))}
		}
		l, err := newClientOn(t, store, "h", seeded(1)).TryAcquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		seen, done := watch(ctx, newClientOn(t, store, "w", seeded(2)), clk, nil)
		step(clk, 20*time.Second, nil)
		learned := len(*seen)
		step(clk, 50*time.Second, nil)
		reads := (*seen)[learned:]
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		step(clk, 53*time.Second, nil)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Watch returned %v once its context ended, want nil", err)
		}
		writes := store.times("jobs/nightly")
		for _, r := range reads {
			var last time.Duration
			for _, w := range writes {
				if w.at <= r.at {
					last = w.at
				}
			}
			lags = append(lags, r.at-last)
		}
		var released time.Duration
		for _, w := range *seen {
			if w.st.Record.State == objlease.StateHeld && (w.st.Record.Holder != "h" || w.st.Expired) {
				t.Errorf("seed %d at %v: %+v, want held by h, not expired", seed, w.at, w.st)
			}
			if released == 0 && w.st.Record.State == objlease.StateReleased {
				released = w.at
			}
		}
		if released == 0 || released > 52*time.Second {
			t.Errorf("seed %d: release at 50 s seen at %v, want within one PollInterval (2 s)", seed, released)
		}
	})
	return lags
}

// A holder that stops renewing is seen expired at the first instant its
// record can expire for the watcher, TTL × (1 + DriftBound) after the
// watcher first saw it, not at the next poll after that.
func TestWatchDeadHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		m, hs := newMem()
		if _, err := newClient(t, hs, "h", clk).TryAcquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		// The holder's renewals never land from now on.
		hs.setHooks(func(op, key string) error {
			if op == "replace" {
				return providers.ErrThrottled
			}
			return nil
		}, nil)
		ctx, cancel := context.WithCancel(t.Context())
		seen, done := watch(ctx, newClient(t, m, "w", clk, func(o *objlease.Options) { o.PollInterval = 3 * time.Second }), clk, nil)
		step(clk, 15*time.Second, nil)
		cancel()
		<-done
		var expired *watched
		for i, w := range *seen {
			if w.st.Expired {
				expired = &(*seen)[i]
				break
			}
		}
		// TTL 10 s × 1.01 after the first read, plus a millisecond, in
		// 100 ms steps.
		if first := (*seen)[0].at; expired == nil || expired.at-first < 10100*time.Millisecond || expired.at-first > 10200*time.Millisecond {
			t.Fatalf("reads at %v; want the record seen expired 10.1 s after the first", atsOf(*seen))
		}
	})
}

// An object at the key that is not a lease record ends the watch at once:
// waiting will not cure it.
func TestWatchBadRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		store := mem.New()
		if _, err := store.Create(t.Context(), "jobs/nightly", []byte("not a record"), nil); err != nil {
			t.Fatal(err)
		}
		seen, done := watch(t.Context(), newClient(t, store, "w", clk), clk, nil)
		synctest.Wait()
		if err := <-done; !errors.Is(err, objlease.ErrBadRecord) {
			t.Fatalf("Watch returned %v, want ErrBadRecord", err)
		}
		if len(*seen) > 0 {
			t.Errorf("the callback saw %d statuses of an object that is not a record", len(*seen))
		}
	})
}

func atsOf(ws []watched) []time.Duration {
	var out []time.Duration
	for _, w := range ws {
		out = append(out, w.at)
	}
	return out
}
