// Package fencetest runs the stale-writer scenarios against any store: a
// holder pauses past its lease, another takes over and writes, the first
// wakes and writes too, and the store must refuse it.
package fencetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/leasetest"
	"github.com/objlease/objlease/providers"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pausedHolderAndSuccessor plays the scenario's lease part: A acquires and
// is then paused (its clock stops) past its TTL; B takes over. It returns
// both leases.
func pausedHolderAndSuccessor(t *testing.T, store providers.Store, key string) (a, b *objlease.Lease) {
	t.Helper()
	ctx := context.Background()
	opts := func(holder string) objlease.Options {
		return objlease.Options{TTL: 10 * time.Second, RenewInterval: 2 * time.Second, Holder: holder}
	}
	ca, err := newOn(store, key, objlease.SessionOptions{Clock: clock.NewFake(epoch)}, opts("A")) // A's clock never moves: paused
	if err != nil {
		t.Fatal(err)
	}
	if a, err = ca.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	bclk := clock.NewFake(epoch)
	cb, err := newOn(store, key, objlease.SessionOptions{Clock: bclk}, opts("B"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cb.TryAcquire(ctx); !errors.Is(err, objlease.ErrHeld) {
		t.Fatalf("B while A holds: %v", err)
	}
	bclk.Advance(11 * time.Second)
	if b, err = cb.TryAcquire(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Token() != a.Token()+1 {
		t.Fatalf("tokens A %d, B %d", a.Token(), b.Token())
	}
	return a, b
}

// pausing runs pause once, just before the first conditional replace: the
// writer has checked the object and is paused before its write.
type pausing struct {
	providers.Store
	once  sync.Once
	pause func()
}

func (p *pausing) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	p.once.Do(p.pause)
	return p.Store.Replace(ctx, key, data, md, v)
}

// RaceResult is what TombstoneRace left behind.
type RaceResult struct {
	Err       error  // the paused writer's error
	Token     uint64 // the token the object holds afterwards
	Tombstone bool   // the object is a tombstone afterwards
	// Repeated: the second tombstone had the first one's version.
	Repeated bool
}

// TombstoneRace plays the tombstone ABA: key is a tombstone of token 5; a
// writer with token 6 (op "put" or "delete") checks it and is paused before
// its conditional write; meanwhile token 7 deletes key. Safe fencing refuses
// the paused writer with ErrStale and leaves token 7's tombstone. Were both
// tombstones identical bytes, their versions would repeat where versions
// are content hashes (S3), the paused write would match, and the token
// would go back to 6.
func TombstoneRace(t *testing.T, store providers.Store, key, op string) RaceResult {
	t.Helper()
	ctx := context.Background()
	opts := fence.Options{UniquePayloads: true}
	if _, err := fence.Put(ctx, store, key, 5, []byte("token 5's payload"), opts); err != nil {
		t.Fatal(err)
	}
	if err := fence.Delete(ctx, store, key, 5, opts); err != nil {
		t.Fatal(err)
	}
	first := stat(t, store, key)
	var second *providers.Attrs
	paused := &pausing{Store: store, pause: func() {
		if err := fence.Delete(ctx, store, key, 7, opts); err != nil {
			t.Errorf("delete with token 7: %v", err)
		}
		second = stat(t, store, key)
	}}
	var r RaceResult
	switch op {
	case "put":
		_, r.Err = fence.Put(ctx, paused, key, 6, []byte("token 6's payload"), opts)
	case "delete":
		r.Err = fence.Delete(ctx, paused, key, 6, opts)
	default:
		t.Fatalf("TombstoneRace: unknown op %q", op)
	}
	if second == nil {
		t.Fatalf("%s with token 6 never reached its conditional write (%v)", op, r.Err)
	}
	after := stat(t, store, key)
	r.Token, _ = strconv.ParseUint(after.Metadata[fence.TokenKey], 10, 64)
	r.Tombstone = after.Metadata[fence.TombstoneKey] == "true"
	r.Repeated = first.Version == second.Version
	return r
}

func stat(t *testing.T, store providers.Store, key string) *providers.Attrs {
	t.Helper()
	a, err := store.Stat(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Config says what the suite runs on: a store and a key prefix, as for
// leasetest, whose Config it is.
type Config = leasetest.Config

// Run runs the scenarios as subtests of t, on cfg.Store under cfg.Prefix.
func Run(t *testing.T, cfg Config) {
	if cfg.Store == nil {
		t.Fatal("fencetest: Config.Store is nil")
	}
	store, prefix := cfg.Store, cfg.Prefix
	ctx := context.Background()
	repeats := store.Properties().VersionsRepeat

	t.Run("StaleWriterRefused", func(t *testing.T) {
		a, b := pausedHolderAndSuccessor(t, store, prefix+"lease-object")
		key := prefix + "output/report.csv"
		opts := fence.Options{UniquePayloads: true} // payloads embed the token
		// A wrote once while it held the lease.
		if _, err := fence.Put(ctx, store, key, a.Token(), []byte(fmt.Sprintf("A %d early", a.Token())), opts); err != nil {
			t.Fatal(err)
		}
		want := []byte(fmt.Sprintf("B %d", b.Token()))
		if _, err := fence.Put(ctx, store, key, b.Token(), want, opts); err != nil {
			t.Fatal(err)
		}
		// A wakes and writes.
		_, err := fence.Put(ctx, store, key, a.Token(), []byte(fmt.Sprintf("A %d late", a.Token())), opts)
		var se *fence.StaleError
		if !errors.As(err, &se) || se.Highest != b.Token() || se.Key != key {
			t.Fatalf("late write by A: %v, want a StaleError naming %q and token %d", err, key, b.Token())
		}
		if err := fence.Delete(ctx, store, key, a.Token(), opts); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("late delete by A: %v, want ErrStale", err)
		}
		obj, tok, err := fence.Get(ctx, store, key, 0)
		if err != nil || !bytes.Equal(obj.Data, want) || tok != b.Token() {
			t.Fatalf("B's data: %q token %d %v", obj.Data, tok, err)
		}
		// B deletes; the tombstone keeps the token, so A still cannot write.
		if err := fence.Delete(ctx, store, key, b.Token(), opts); err != nil {
			t.Fatal(err)
		}
		if _, _, err := fence.Get(ctx, store, key, 0); !errors.Is(err, providers.ErrNotFound) {
			t.Fatalf("after fenced delete: %v, want ErrNotFound", err)
		}
		if _, err := fence.Put(ctx, store, key, a.Token(), []byte("A again"), opts); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("A after B's delete: %v, want ErrStale", err)
		}
	})

	for _, op := range []string{"put", "delete"} {
		t.Run("StaleWriterPausedAcrossDelete/"+op, func(t *testing.T) {
			r := TombstoneRace(t, store, prefix+"tombstone-race-"+op, op)
			if r.Repeated {
				t.Errorf("two tombstones had the same version")
			}
			if !errors.Is(r.Err, fence.ErrStale) || r.Token != 7 || !r.Tombstone {
				t.Fatalf("%s by token 6, paused across a delete by token 7: %v; object holds token %d, tombstone %v; want ErrStale and token 7's tombstone",
					op, r.Err, r.Token, r.Tombstone)
			}
		})
	}

	t.Run("LeaseRecordRefused", func(t *testing.T) {
		key := prefix + "a-lease"
		c, err := newOn(store, key, objlease.SessionOptions{Clock: clock.NewFake(epoch)}, objlease.Options{TTL: 10 * time.Second, Holder: "holder"})
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		opts := fence.Options{UniquePayloads: true}
		for _, tok := range []uint64{l.Token(), l.Token() + 5} {
			_, err := fence.Put(ctx, store, key, tok, []byte("x"), opts)
			if !errors.Is(err, fence.ErrLeaseRecord) || !strings.Contains(err.Error(), key) {
				t.Errorf("put with token %d on a lease record: %v, want ErrLeaseRecord naming the key", tok, err)
			}
			if err := fence.Delete(ctx, store, key, tok, opts); !errors.Is(err, fence.ErrLeaseRecord) {
				t.Errorf("delete with token %d on a lease record: %v, want ErrLeaseRecord", tok, err)
			}
		}
		st, err := c.Inspect(ctx)
		if err != nil || st.Record == nil || st.Record.Token != l.Token() || st.Record.State != objlease.StateHeld {
			t.Fatalf("lease after refused fenced writes: %+v %v", st, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("InPlaceRefusedWhereVersionsRepeat", func(t *testing.T) {
		_, err := fence.Put(ctx, store, prefix+"plain", 1, []byte("x"), fence.Options{})
		if repeats && !errors.Is(err, fence.ErrVersionsRepeat) {
			t.Fatalf("store declares repeating versions: %v, want ErrVersionsRepeat", err)
		}
		if !repeats && err != nil {
			t.Fatal(err)
		}
	})

	t.Run("StaleCommitRefused", func(t *testing.T) {
		a, b := pausedHolderAndSuccessor(t, store, prefix+"lease-prefix")
		out := prefix + "daily/"
		ba := fence.NewBatch(store, out, a.Token())
		if err := ba.Put(ctx, "part-0", []byte("A part 0")); err != nil {
			t.Fatal(err)
		}
		bb := fence.NewBatch(store, out, b.Token())
		for i := range 3 {
			if err := bb.Put(ctx, fmt.Sprint("part-", i), []byte(fmt.Sprint("B part ", i))); err != nil {
				t.Fatal(err)
			}
		}
		committed, err := bb.Commit(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		// A wakes, writes more and commits.
		if err := ba.Put(ctx, "part-1", []byte("A part 1")); err != nil {
			t.Fatal(err)
		}
		if _, err := ba.Commit(ctx, false); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("A's late commit: %v, want ErrStale", err)
		}
		got, err := fence.ReadCommitted(ctx, store, out)
		if err != nil {
			t.Fatal(err)
		}
		if got.Token != b.Token() || fmt.Sprint(got.Names()) != "[part-0 part-1 part-2]" || got.Nonce != committed.Nonce {
			t.Fatalf("committed set %+v", got)
		}
		for _, n := range got.Names() {
			obj, err := store.Get(ctx, got.Objects[n].Key, 0)
			if err != nil || !bytes.HasPrefix(obj.Data, []byte("B part")) {
				t.Fatalf("%s: %q %v (A's bytes must never be committed output)", n, obj.Data, err)
			}
		}
		// A's orphans are collected; B's objects stay.
		n, err := fence.Collect(ctx, store, out)
		if err != nil || n != 2 {
			t.Fatalf("collected %d, %v; want A's 2 objects", n, err)
		}
		for _, n := range got.Names() {
			if _, err := store.Stat(ctx, got.Objects[n].Key); err != nil {
				t.Fatalf("collect removed committed %s: %v", n, err)
			}
		}
	})

	// Identical bytes from both jobs: on S3 their objects' ETags are equal,
	// and the batch design must not care.
	t.Run("StaleCommitRefusedWithIdenticalBytes", func(t *testing.T) {
		a, b := pausedHolderAndSuccessor(t, store, prefix+"lease-identical")
		out := prefix + "identical/"
		same := []byte("the same bytes")
		ba := fence.NewBatch(store, out, a.Token())
		if err := ba.Put(ctx, "f", same); err != nil {
			t.Fatal(err)
		}
		if _, err := ba.Commit(ctx, false); err != nil { // A commits while it still could
			t.Fatal(err)
		}
		// A prepares another commit: it has read the manifest (inside
		// Commit) — emulate the pause by committing B first, with the very
		// same bytes.
		bb := fence.NewBatch(store, out, b.Token())
		if err := bb.Put(ctx, "f", same); err != nil {
			t.Fatal(err)
		}
		if _, err := bb.Commit(ctx, false); err != nil {
			t.Fatal(err)
		}
		if err := ba.Put(ctx, "f", same); err != nil {
			t.Fatal(err)
		}
		if _, err := ba.Commit(ctx, false); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("A's late commit of identical bytes: %v, want ErrStale", err)
		}
		if got, err := fence.ReadCommitted(ctx, store, out); err != nil || got.Token != b.Token() {
			t.Fatalf("committed %+v %v", got, err)
		}
	})
}

// newOn is objlease.New on a session of its own with so: the scenario's
// clock.
func newOn(store providers.Store, key string, so objlease.SessionOptions, opts objlease.Options) (*objlease.Client, error) {
	sess, err := objlease.NewSession(store, so)
	if err != nil {
		return nil, err
	}
	return sess.Client(key, opts)
}
