package fence_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/objlease/clock"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers/mem"
)

// TestManifestLeaseRecordRefused: a guarded prefix whose manifest key holds
// a lease record is not committed to (fencetest's LeaseRecordRefused covers
// Put and Delete on every store).
func TestManifestLeaseRecordRefused(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	key := "out/_objlease/manifest.json"
	c, err := newOn(s, key, objlease.SessionOptions{Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}, objlease.Options{TTL: 10 * time.Second, Holder: "h"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	b := fence.NewBatch(s, "out/", 4)
	if err := b.Put(ctx, "part-0", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Commit(ctx, false); !errors.Is(err, fence.ErrLeaseRecord) || !strings.Contains(err.Error(), key) {
		t.Fatalf("commit over a lease record: %v, want ErrLeaseRecord naming %q", err, key)
	}
	if st, err := c.Inspect(ctx); err != nil || st.Record.Token != l.Token() || st.Record.State != objlease.StateHeld {
		t.Fatalf("lease after the refused commit: %+v %v", st, err)
	}
}

// TestUnfencedObjectFencedFromFirstWrite: an object that is neither fenced
// nor a lease record (here JSON without the schema field) is written, and
// fenced from then on.
func TestUnfencedObjectFencedFromFirstWrite(t *testing.T) {
	ctx := context.Background()
	s := newMD5Store()
	if _, err := s.Create(ctx, "plain", []byte(`{"objlease_manifest":1,"token":9}`), nil); err != nil {
		t.Fatal(err)
	}
	opts := fence.Options{UniquePayloads: true}
	if _, err := fence.Put(ctx, s, "plain", 2, []byte("y"), opts); err != nil {
		t.Fatalf("put on a plain object: %v", err)
	}
	if _, err := fence.Put(ctx, s, "plain", 1, []byte("z"), opts); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("older token afterwards: %v, want ErrStale", err)
	}
}

// TestHandDeletedLeaseRecord pins down what fencing cannot do: a lease
// record deleted by hand lets the next holder start again at token 1, and a
// fenced object last written with token 1 accepts it, next to the old holder
// that may still be writing with token 1. Break ends a lease with a higher
// token instead, which the old holder's writes are refused against.
func TestHandDeletedLeaseRecord(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	newClient := func(holder string) *objlease.Client {
		c, err := newOn(s, "lease", objlease.SessionOptions{Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}, objlease.Options{TTL: 10 * time.Second, Holder: holder})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old, err := newClient("old").TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fence.Put(ctx, s, "out", old.Token(), []byte("old 1"), fence.Options{}); err != nil {
		t.Fatal(err)
	}
	a, _ := s.Stat(ctx, "lease")
	if err := s.Delete(ctx, "lease", a.Version); err != nil { // by hand
		t.Fatal(err)
	}
	next, err := newClient("new").TryAcquire(ctx)
	if err != nil || next.Token() != old.Token() {
		t.Fatalf("after a hand delete: %v, token %d; the token starts again at %d", err, next.Token(), old.Token())
	}
	if _, err := fence.Put(ctx, s, "out", next.Token(), []byte("new 1"), fence.Options{}); err != nil {
		t.Fatalf("the new holder's equal token: %v", err)
	}
	if _, err := fence.Put(ctx, s, "out", old.Token(), []byte("old 1 again"), fence.Options{}); err != nil {
		t.Fatalf("the old holder is not refused either: %v", err)
	}

	// Break instead: the token goes up and the old holder is refused.
	tok, err := newClient("operator").Break(ctx)
	if err != nil || tok <= old.Token() {
		t.Fatalf("break: %d %v", tok, err)
	}
	if _, err := fence.Put(ctx, s, "out", tok, []byte("after break"), fence.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.Put(ctx, s, "out", old.Token(), []byte("old again"), fence.Options{}); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("old holder after break: %v, want ErrStale", err)
	}
}
