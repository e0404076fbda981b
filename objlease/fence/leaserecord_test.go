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
	c, err := objlease.New(s, key, objlease.Options{TTL: 10 * time.Second, Holder: "h", Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
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
