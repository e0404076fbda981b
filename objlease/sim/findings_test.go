package sim

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/faulty"
	"github.com/objlease/objlease/providers/mem"
)

// A later batch of the same token must not change an object an earlier
// batch committed: it used to overwrite it in place, before (and whether
// or not) it committed, leaving the manifest listing a version the store
// no longer had. Found by the simulation's "committed object missing"
// check; batch objects are now write-once.
func TestBatchRewriteKeepsCommittedSet(t *testing.T) {
	ctx := context.Background()
	store := mem.New()
	const prefix, token = "out/", 7

	first := fence.NewBatch(store, prefix, token)
	if err := first.Put(ctx, "part-0", []byte("committed")); err != nil {
		t.Fatal(err)
	}
	m, err := first.Commit(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	committed := m.Objects["part-0"]

	// The same job starts another incremental batch and rewrites part-0,
	// then stops (its lease is lost, it crashes) before committing.
	second := fence.NewBatch(store, prefix, token)
	if err := second.Put(ctx, "part-0", []byte("never committed")); err != nil && !errors.Is(err, providers.ErrPrecondition) {
		t.Fatalf("rewriting a committed name: %v, want success or ErrPrecondition", err)
	}

	got, err := fence.ReadCommitted(ctx, store, prefix)
	if err != nil {
		t.Fatal(err)
	}
	e := got.Objects["part-0"]
	obj, err := store.Get(ctx, e.Key, 0)
	if err != nil {
		t.Fatal(err)
	}
	if obj.Version != committed.Version || string(obj.Data) != "committed" {
		t.Fatalf("committed object %s changed without a commit: manifest lists version %s, store holds version %s with %q",
			e.Key, committed.Version, obj.Version, obj.Data)
	}
}

// Release stops background renewal and waits for it. A renewal hung in a
// request without a deadline of its own used to hold Release forever,
// whatever Release's context said: closing stop also stopped the validity
// watcher, the only thing that would have cancelled the renewal.
func TestReleaseHonoursContextDuringHungRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, err := faulty.New(mem.New(), faulty.Config{Seed: 1, Ops: map[faulty.Op]faulty.Rates{faulty.Replace: {Stall: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := objlease.New(f, "leases/job", objlease.Options{TTL: 30 * time.Second, Holder: "a"})
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.TryAcquire(context.Background()) // a create: not stalled
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(11 * time.Second) // the first renewal (every 10 s) is now stalled
		synctest.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- l.Release(ctx) }()
		select {
		case err := <-done:
			t.Logf("Release returned %v", err)
		case <-time.After(time.Hour):
			t.Errorf("Release(ctx with a 1-minute deadline) still blocked after an hour, waiting for a hung renewal")
			f.ReleaseStalls()
			<-done
		}
	})
}

// Renew may be called while the background renewal is in flight (its
// doc invites callers to renew "at a moment of your choosing"). Both used
// to write against the same version; the store accepted one and refused
// the other, and the refused one ended the lease as lost although nobody
// else wrote. A holder's writes are now serialised.
func TestRenewConcurrentWithBackgroundRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, err := faulty.New(mem.New(), faulty.Config{Seed: 1, Ops: map[faulty.Op]faulty.Rates{faulty.Replace: {Delay: 1}},
			MinDelay: time.Second, MaxDelay: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c, err := objlease.New(f, "leases/job", objlease.Options{TTL: 30 * time.Second, Holder: "a"})
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.TryAcquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Second + 100*time.Millisecond) // the background renewal is on its way
		if err := l.Renew(context.Background()); err != nil {
			t.Errorf("Renew while the background renewal is in flight: %v (lease error %v); nobody else wrote the record", err, l.Err())
		}
		synctest.Wait()
		if err := l.Err(); err != nil {
			t.Errorf("lease ended: %v", err)
		}
		_ = l.Release(context.Background())
	})
}

// Seeds of the widened simulation that found faults of outcome reporting,
// replayed on every run:
//   - 48, 251: a release landed, its reply was lost, and successors took
//     the lease (seen within the holder's validity in 48, after it in 251);
//     Release reported the lease lost. Now: released (48), ErrAmbiguous (251).
//   - 2441: a renewal's write reached the store after its call had given
//     up; the next renewal, refused by it, ended the lease as lost though
//     the record was the holder's own. Now the next renewal goes over it.
func TestOutcomeFindingSeeds(t *testing.T) {
	for _, seed := range []uint64{48, 251, 2441} {
		r := simulate(t, configFor(seed))
		for _, v := range r.violations {
			t.Errorf("seed %d: %s: %s", seed, v.kind, v.msg)
		}
	}
}
