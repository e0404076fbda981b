package objlease_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

type acquired struct {
	l   *objlease.Lease
	err error
	at  time.Duration // since epoch
}

// awaitFunc starts AcquireFunc on c and returns where its result arrives.
func awaitFunc(ctx context.Context, c *objlease.Client, clk *clock.Fake) <-chan acquired {
	got := make(chan acquired, 1)
	c.AcquireFunc(ctx, func(l *objlease.Lease, err error) {
		got <- acquired{l, err, clk.Now().Sub(epoch)}
	})
	return got
}

// A waiter of AcquireFunc takes a released lease on its next attempt, and
// the lease it is given renews in the background like any other.
func TestAcquireFuncTakesReleasedLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		store := newWriteLog(mem.New(), clk)
		held := holdMany(t, newSession(t, store, clk), 1)[0]
		c, err := newOn(store, held.Key(), objlease.SessionOptions{Clock: clk}, objlease.Options{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, Holder: "waiter"})
		if err != nil {
			t.Fatal(err)
		}
		got := awaitFunc(context.Background(), c, clk)
		step(clk, 5*time.Second, nil)
		select {
		case r := <-got:
			t.Fatalf("given %+v while the lease was held", r)
		default:
		}
		if err := held.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		var r acquired
		step(clk, 30*time.Second, func(time.Duration) {
			select {
			case r = <-got:
			default:
			}
		})
		if r.err != nil || r.l == nil {
			t.Fatalf("AcquireFunc: %+v", r)
		}
		defer r.l.Release(context.Background())
		// Once the waiter knows the holder's renewal phase it reads just
		// after each renewal (R = 2 s): a release, which lands at no
		// renewal's beat, is seen within R + R/16.
		if r.l.Token() != 2 || r.at > 5*time.Second+2125*time.Millisecond {
			t.Fatalf("given token %d at %v, want token 2 within R + R/16 of the release at 5s", r.l.Token(), r.at)
		}
		if err := r.l.Err(); err != nil {
			t.Fatalf("lease given ended: %v", err)
		}
		if n := len(store.times(held.Key())); n < 10 {
			t.Fatalf("%d writes of the record, want the new holder's renewals", n)
		}
	})
}

// A waiter whose context ends is told once, with the context's cause and
// the last attempt's error, and leaves nothing running.
func TestAcquireFuncEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		store := mem.New()
		held := holdMany(t, newSession(t, store, clk), 1)[0]
		defer held.Release(context.Background())
		c, err := newOn(store, held.Key(), objlease.SessionOptions{Clock: clk}, objlease.Options{TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		got := make(chan error, 2)
		c.AcquireFunc(ctx, func(l *objlease.Lease, err error) {
			calls++
			got <- err
		})
		step(clk, 3*time.Second, nil)
		cancel()
		synctest.Wait()
		err = <-got
		if !errors.Is(err, context.Canceled) || !errors.Is(err, objlease.ErrHeld) {
			t.Fatalf("AcquireFunc after cancel: %v, want context.Canceled and ErrHeld", err)
		}
		step(clk, 10*time.Second, nil)
		if calls != 1 {
			t.Fatalf("f called %d times, want once", calls)
		}
	})
}

// An error waiting cannot cure is given at once, not retried.
func TestAcquireFuncPermanentError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		store := mem.New()
		if _, err := store.Create(context.Background(), "leases/foreign", []byte("not a lease"), nil); err != nil {
			t.Fatal(err)
		}
		c, err := newOn(store, "leases/foreign", objlease.SessionOptions{Clock: clk}, objlease.Options{TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got := awaitFunc(context.Background(), c, clk)
		synctest.Wait()
		select {
		case r := <-got:
			if !errors.Is(r.err, objlease.ErrBadRecord) || r.at != 0 {
				t.Fatalf("AcquireFunc on a foreign object: %v at %v, want ErrBadRecord at once", r.err, r.at)
			}
		default:
			t.Fatal("AcquireFunc still waiting on a foreign object")
		}
	})
}

// Waiters cost no goroutine each: a thousand of them, all polling, run on
// the scheduler's few goroutines and bounded pool of workers, and every
// one is told when they give up.
func TestAcquireFuncNoGoroutinePerWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		clk := clock.NewFake(epoch)
		store := mem.New()
		sess := newSession(t, store, clk)
		held := holdMany(t, sess, 1)[0]
		defer held.Release(context.Background())
		before := runtime.NumGoroutine()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, n)
		for i := range n {
			c, err := sess.Client(held.Key(), objlease.Options{
				TTL: 10 * time.Second, Holder: fmt.Sprintf("w%d", i),
			})
			if err != nil {
				t.Fatal(err)
			}
			c.AcquireFunc(ctx, func(_ *objlease.Lease, err error) { done <- err })
		}
		most := 0
		step(clk, 10*time.Second, func(time.Duration) { most = max(most, runtime.NumGoroutine()-before) })
		// The watcher, dispatcher and waker exist already (the holder's);
		// the workers are at most 64.
		if most > 64 {
			t.Errorf("%d goroutines more while %d waiters polled, want at most 64 workers", most, n)
		}
		cancel()
		for range n {
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("waiter given %v, want context.Canceled", err)
			}
		}
	})
}

// hangKey is a store on which every create and read of one key hangs
// until its context ends, as on a store that stopped answering for it.
type hangKey struct {
	providers.Store
	key string
}

func (h hangKey) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	if key == h.key {
		<-ctx.Done()
		return providers.WriteResult{}, providers.Wrap("create", key, providers.ErrUnknownOutcome, ctx.Err())
	}
	return h.Store.Create(ctx, key, data, md)
}

func (h hangKey) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	if key == h.key {
		<-ctx.Done()
		return nil, providers.Wrap("get", key, providers.ErrUnreachable, ctx.Err())
	}
	return h.Store.Get(ctx, key, max)
}

// Waiters whose attempts hang leave the scheduler's workers to the
// renewals: leases on the same store keep renewing however many waiters
// are stuck.
func TestAcquireFuncHungAttemptsStarveNoRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(epoch)
		store := hangKey{Store: mem.New(), key: "leases/unanswered"}
		sess := newSession(t, store, clk)
		leases := holdMany(t, sess, 5)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 200)
		for i := range 200 {
			c, err := sess.Client("leases/unanswered", objlease.Options{
				TTL: 10 * time.Second, Holder: fmt.Sprintf("w%d", i),
			})
			if err != nil {
				t.Fatal(err)
			}
			c.AcquireFunc(ctx, func(_ *objlease.Lease, err error) { done <- err })
		}
		step(clk, 30*time.Second, nil)
		for i, l := range leases {
			if err := l.Err(); err != nil {
				t.Errorf("lease %d ended while waiters hung: %v", i, err)
			}
		}
		cancel()
		for range 200 {
			<-done
		}
		for _, l := range leases {
			_ = l.Release(context.Background())
		}
	})
}
