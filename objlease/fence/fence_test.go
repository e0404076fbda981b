package fence_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/objlease/objlease/objlease/fence"

	"github.com/objlease/objlease/objlease/fence/fencetest"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

func TestMem(t *testing.T) { fencetest.Run(t, fencetest.Config{Store: mem.New(), Prefix: "t/"}) }

// repeatingStore declares S3's property: the scenarios must adapt to it.
type repeatingStore struct{ *providers.Bucket }

func (repeatingStore) Properties() providers.Properties {
	return providers.Properties{Name: "repeating", VersionsRepeat: true}
}

func TestVersionsRepeat(t *testing.T) {
	fencetest.Run(t, fencetest.Config{Store: repeatingStore{mem.New()}, Prefix: "t/"})
}

func TestCommitWritten(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	for i := range 3 {
		if err := fence.NewBatch(s, "out/", 9).Put(ctx, fmt.Sprint("f", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	fence.NewBatch(s, "out/", 8).Put(ctx, "stale", []byte("x"))
	m, err := fence.CommitWritten(ctx, s, "out/", 9, false)
	if err != nil || fmt.Sprint(m.Names()) != "[f0 f1 f2]" {
		t.Fatalf("%v %v", m, err)
	}
	if _, err := fence.CommitWritten(ctx, s, "out/", 8, false); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale: %v", err)
	}
}

// A fenced Put or Delete never touches a batch's own objects: over the
// manifest it would make every later commit of the prefix fail.
func TestPutRefusesBatchNames(t *testing.T) {
	store := mem.New()
	ctx := t.Context()
	b := fence.NewBatch(store, "out/", 3)
	if err := b.Put(ctx, "f.txt", []byte("rows")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Commit(ctx, false); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"out/_objlease/manifest.json", "_objlease/manifest.json", "out/_objlease/00000000000000000003/f.txt"} {
		if _, err := fence.Put(ctx, store, key, 9, []byte("x"), fence.Options{}); !errors.Is(err, fence.ErrReservedKey) {
			t.Errorf("Put %q: %v, want ErrReservedKey", key, err)
		}
		if err := fence.Delete(ctx, store, key, 9, fence.Options{}); !errors.Is(err, fence.ErrReservedKey) {
			t.Errorf("Delete %q: %v, want ErrReservedKey", key, err)
		}
	}
	if m, err := fence.ReadCommitted(ctx, store, "out/"); err != nil || m.Token != 3 {
		t.Errorf("the commit after the refused writes: %+v, %v", m, err)
	}
	// A manifest written by something else is reported as such.
	if _, err := store.Replace(ctx, "out/_objlease/manifest.json", []byte(`{"not":"a manifest"}`), nil, mustVersion(t, store, "out/_objlease/manifest.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.ReadCommitted(ctx, store, "out/"); !errors.Is(err, fence.ErrBadManifest) {
		t.Errorf("ReadCommitted over a foreign manifest: %v, want ErrBadManifest", err)
	}
}

func mustVersion(t *testing.T, store providers.Store, key string) string {
	t.Helper()
	a, err := store.Stat(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return a.Version
}
