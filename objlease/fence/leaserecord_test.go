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
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// leaseAtToken3 leaves a lease at key held with token 3.
func leaseAtToken3(t *testing.T, s providers.Store, key string) *objlease.Client {
	t.Helper()
	ctx := context.Background()
	c, err := objlease.New(s, key, objlease.Options{TTL: 10 * time.Second, Holder: "h", Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		l, err := c.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c
}

// TestLeaseRecordRefused: a fenced write never replaces or deletes a lease
// record, whatever its token: the record would be lost, and with it the
// lease's token memory.
func TestLeaseRecordRefused(t *testing.T) {
	ctx := context.Background()
	for name, s := range map[string]providers.Store{"mem": mem.New(), "md5": newMD5Store()} {
		t.Run(name, func(t *testing.T) {
			key := "leases/job"
			c := leaseAtToken3(t, s, key)
			opts := fence.Options{UniquePayloads: true}
			check := func(op, key string, err error) {
				t.Helper()
				if !errors.Is(err, fence.ErrLeaseRecord) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "lease record") {
					t.Errorf("%s on a lease record: %v, want ErrLeaseRecord naming %q", op, err, key)
				}
			}
			for _, tok := range []uint64{1, 3, 9} {
				_, err := fence.Put(ctx, s, key, tok, []byte("x"), opts)
				check("put", key, err)
				check("delete", key, fence.Delete(ctx, s, key, tok, opts))
			}
			st, err := c.Inspect(ctx)
			if err != nil || st.Record == nil || st.Record.Token != 3 || st.Record.State != objlease.StateHeld {
				t.Fatalf("lease after refused writes: %+v %v", st, err)
			}
			// A guarded prefix whose manifest key holds a lease record.
			prefix := "out/"
			leaseAtToken3(t, s, prefix+"_objlease/manifest.json")
			b := fence.NewBatch(s, prefix, 4)
			if err := b.Put(ctx, "part-0", []byte("x")); err != nil {
				t.Fatal(err)
			}
			_, err = b.Commit(ctx, false)
			check("commit", prefix+"_objlease/manifest.json", err)
			// Objects that are neither fenced nor lease records are still
			// fenced from the first write on.
			if _, err := s.Create(ctx, "plain", []byte(`{"some":"json"}`), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := fence.Put(ctx, s, "plain", 2, []byte("y"), opts); err != nil {
				t.Fatalf("put on a plain object: %v", err)
			}
		})
	}
}
