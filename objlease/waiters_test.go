package objlease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/election"
	"github.com/objlease/objlease/objlease/semaphore"
	"github.com/objlease/objlease/objlease/shard"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// permanentClass is one class of error that waiting cannot cure, and how
// to make a store produce it.
type permanentClass struct {
	name string
	want error
	// setup makes the store fail so: either by an error of every request,
	// or by what it puts at the waiter's keys.
	setup func(t *testing.T, hs *hookStore, keys []string)
}

func failEvery(err error) func(*testing.T, *hookStore, []string) {
	return func(_ *testing.T, hs *hookStore, _ []string) {
		hs.setHooks(func(op, key string) error { return fmt.Errorf("%s %s: %w", op, key, err) }, nil)
	}
}

func putAt(body string, md map[string]string) func(*testing.T, *hookStore, []string) {
	return func(t *testing.T, hs *hookStore, keys []string) {
		for _, k := range keys {
			if _, err := hs.Store.Create(context.Background(), k, []byte(body), md); err != nil {
				t.Fatal(err)
			}
		}
	}
}

var permanentClasses = []permanentClass{
	{"no bucket", providers.ErrNoBucket, failEvery(providers.ErrNoBucket)},
	{"credentials refused", providers.ErrPermission, failEvery(providers.ErrPermission)},
	{"wrong endpoint", providers.ErrWrongEndpoint, failEvery(providers.ErrWrongEndpoint)},
	{"unsupported", errors.ErrUnsupported, failEvery(errors.ErrUnsupported)},
	{"invalid key", providers.ErrInvalidKey, failEvery(providers.ErrInvalidKey)},
	{"not a record", objlease.ErrBadRecord, putAt("not a lease", nil)},
	{"newer schema", objlease.ErrNewerSchema, putAt(`{"objlease":99,"name":"x","token":1,"state":"held","ttl_ms":1000}`, nil)},
	{"fenced object", objlease.ErrFencedObject, putAt("data", map[string]string{"objlease-token": "3"})},
	{"token exhausted", objlease.ErrTokenExhausted, putAt(`{"objlease":1,"name":"x","token":18446744073709551615,"nonce":"n","state":"released","ttl_ms":1000}`, nil)},
}

// aWaiter is one of the loops that wait for a lease: start starts it on
// store with a fake clock that is never advanced, and returns a channel that
// receives its error when it ends.
type aWaiter struct {
	name string
	keys []string // where a record-level class puts its object
	// records: the waiter reads the lease record (record-level classes
	// apply).
	start func(t *testing.T, ctx context.Context, store providers.Store, clk *clock.Fake) <-chan error
}

func leaseClient(t *testing.T, store providers.Store, clk *clock.Fake) *objlease.Client {
	return newClient(t, store, "waiter", clk)
}

var waiters = []aWaiter{
	{"Client.Acquire", []string{"jobs/nightly"}, func(t *testing.T, ctx context.Context, store providers.Store, clk *clock.Fake) <-chan error {
		c := leaseClient(t, store, clk)
		done := make(chan error, 1)
		go func() { _, err := c.Acquire(ctx); done <- err }()
		return done
	}},
	{"Client.AcquireFunc", []string{"jobs/nightly"}, func(t *testing.T, ctx context.Context, store providers.Store, clk *clock.Fake) <-chan error {
		c := leaseClient(t, store, clk)
		done := make(chan error, 1)
		c.AcquireFunc(ctx, func(_ *objlease.Lease, err error) { done <- err })
		return done
	}},
	{"election.Run", []string{"jobs/nightly"}, func(t *testing.T, ctx context.Context, store providers.Store, clk *clock.Fake) <-chan error {
		e, err := election.New(newSession(t, store, clk), "jobs/nightly", objlease.Options{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, Holder: "waiter"},
			election.Config{OnStartedLeading: func(context.Context, *objlease.Lease) {}})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		return done
	}},
	{"semaphore.Acquire", []string{"pool/slot-0"}, func(t *testing.T, ctx context.Context, store providers.Store, clk *clock.Fake) <-chan error {
		s, err := semaphore.New(newSession(t, store, clk), "pool", 1, objlease.Options{TTL: 10 * time.Second, Holder: "waiter"})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := s.Acquire(ctx); done <- err }()
		return done
	}},
	{"shard.Worker.Run", []string{shard.MemberKey("group", "waiter")}, func(t *testing.T, ctx context.Context, store providers.Store, clk *clock.Fake) <-chan error {
		w, err := shard.New(newSession(t, store, clk), "group", objlease.Options{TTL: 10 * time.Second}, shard.Config{Member: "waiter", Shards: []string{"a"}, Work: func(context.Context, *shard.Shard) {}})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		return done
	}},
}

// TestEveryWaiterEndsAtOnceOnPermanentErrors: every loop that waits for a
// lease ends at once, with the error, when it meets an error that waiting
// cannot cure (a missing bucket, refused credentials, a key that is not a
// lease record, ...), instead of retrying it until its context ends.
func TestEveryWaiterEndsAtOnceOnPermanentErrors(t *testing.T) {
	for _, w := range waiters {
		for _, pc := range permanentClasses {
			t.Run(w.name+"/"+pc.name, func(t *testing.T) {
				m := mem.New()
				hs := newHookStore(m)
				pc.setup(t, hs, w.keys)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := w.start(t, ctx, hs, clock.NewFake(epoch))
				select {
				case err := <-done:
					if !errors.Is(err, pc.want) {
						t.Fatalf("ended with %v, want %v", err, pc.want)
					}
				case <-time.After(2 * time.Second):
					cancel()
					err := <-done
					t.Fatalf("still waiting after 2 s (the fake clock never moved); when cancelled: %v", err)
				}
			})
		}
	}
}
