package fence_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/objlease/objlease/internal/safeguards"
	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/objlease/fence/fencetest"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// md5Store models S3's versions: a version is the MD5 of the object's bytes,
// metadata left out, so writing identical bytes again gives an earlier
// version again. Conditions are checked against that version; the mem store
// underneath keeps each check and write atomic.
type md5Store struct{ m *mem.Store }

func newMD5Store() md5Store { return md5Store{mem.New()} }

func md5Version(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

func (s md5Store) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	o, err := s.m.Get(ctx, key, max)
	if err != nil {
		return nil, err
	}
	o.Version = md5Version(o.Data)
	return o, nil
}

func (s md5Store) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	o, err := s.Get(ctx, key, 0)
	if err != nil {
		return nil, err
	}
	return &o.Attrs, nil
}

func (s md5Store) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	res, err := s.m.Create(ctx, key, data, md)
	res.Version = md5Version(data)
	return res, err
}

// current returns the mem version of key if its MD5 version is ifVersion.
func (s md5Store) current(ctx context.Context, op, key, ifVersion string) (string, error) {
	o, err := s.m.Get(ctx, key, 0)
	switch {
	case errors.Is(err, providers.ErrNotFound):
		return "", providers.Wrap(op, key, providers.ErrPrecondition, err)
	case err != nil:
		return "", err
	case md5Version(o.Data) != ifVersion:
		return "", providers.Wrap(op, key, providers.ErrPrecondition, fmt.Errorf("version is %s", md5Version(o.Data)))
	}
	return o.Version, nil
}

func (s md5Store) Replace(ctx context.Context, key string, data []byte, md map[string]string, ifVersion string) (providers.WriteResult, error) {
	v, err := s.current(ctx, "replace", key, ifVersion)
	if err != nil {
		return providers.WriteResult{}, err
	}
	res, err := s.m.Replace(ctx, key, data, md, v)
	res.Version = md5Version(data)
	return res, err
}

func (s md5Store) Delete(ctx context.Context, key, ifVersion string) error {
	v, err := s.current(ctx, "delete", key, ifVersion)
	if err != nil {
		return err
	}
	return s.m.Delete(ctx, key, v)
}

func (s md5Store) List(ctx context.Context, prefix, token string, n int) (providers.ListPage, error) {
	page, err := s.m.List(ctx, prefix, token, n)
	for i, a := range page.Objects {
		if o, gerr := s.m.Get(ctx, a.Key, 0); gerr == nil {
			page.Objects[i].Version = md5Version(o.Data)
		}
	}
	return page, err
}

func (s md5Store) Properties() providers.Properties {
	return providers.Properties{Name: "md5", VersionsRepeat: true}
}
func (s md5Store) As(target any) bool { return false }
func (s md5Store) Close() error       { return nil }

// pausing runs pause once, just before the first conditional write, as if
// the writer had been paused between its check and its write.
type pausing struct {
	providers.Store
	once  sync.Once
	pause func()
}

func (p *pausing) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	p.once.Do(p.pause)
	return p.Store.Replace(ctx, key, data, md, v)
}

func TestContentHashVersions(t *testing.T) { fencetest.Run(t, newMD5Store(), "t/") }

func tokenAt(t *testing.T, s providers.Store, key string) (uint64, bool) {
	t.Helper()
	a, err := s.Stat(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	var tok uint64
	fmt.Sscan(a.Metadata[fence.TokenKey], &tok)
	return tok, a.Metadata[fence.TombstoneKey] == "true"
}

// TestTombstoneABA: X is a tombstone of token 5. A (token 6) reads it and is
// paused; B (token 7) deletes X. If B's tombstone had the bytes of token 5's,
// its version would repeat, A's conditional write would match it and X's
// token would go back from 7 to 6.
func TestTombstoneABA(t *testing.T) {
	ctx := context.Background()
	opts := fence.Options{UniquePayloads: true}
	late := map[string]func(s providers.Store, key string) error{
		"stale delete": func(s providers.Store, key string) error { return fence.Delete(ctx, s, key, 6, opts) },
		"stale put": func(s providers.Store, key string) error {
			_, err := fence.Put(ctx, s, key, 6, []byte("A's unique payload, token 6"), opts)
			return err
		},
	}
	run := func(t *testing.T, op string) (token uint64, tombstone bool, err error) {
		s := newMD5Store()
		key := "out/x"
		if _, err := fence.Put(ctx, s, key, 5, []byte("token 5's payload"), opts); err != nil {
			t.Fatal(err)
		}
		if err := fence.Delete(ctx, s, key, 5, opts); err != nil {
			t.Fatal(err)
		}
		before, _ := s.Stat(ctx, key)
		var after *providers.Attrs
		a := &pausing{Store: s, pause: func() {
			if err := fence.Delete(ctx, s, key, 7, opts); err != nil {
				t.Fatalf("B's delete: %v", err)
			}
			after, _ = s.Stat(ctx, key)
		}}
		err = late[op](a, key)
		token, tombstone = tokenAt(t, s, key)
		if safeguards.UniqueTombstones.Load() && after.Version == before.Version {
			t.Errorf("two tombstones have the same version %s", after.Version)
		}
		if !safeguards.UniqueTombstones.Load() && after.Version != before.Version {
			t.Fatalf("the model did not repeat the empty tombstone's version: %s, then %s", before.Version, after.Version)
		}
		return token, tombstone, err
	}
	for op := range late {
		t.Run(op, func(t *testing.T) {
			tok, tomb, err := run(t, op)
			if !errors.Is(err, fence.ErrStale) || tok != 7 || !tomb {
				t.Fatalf("A's late %s: %v, token now %d, tombstone %v; want ErrStale and B's tombstone of token 7", op, err, tok, tomb)
			}
		})
		// The same run with empty tombstones shows the repeat this test
		// is about: A's write lands and the token goes back.
		t.Run(op+"/empty tombstones", func(t *testing.T) {
			safeguards.UniqueTombstones.Store(false)
			defer safeguards.UniqueTombstones.Store(true)
			tok, _, err := run(t, op)
			if err != nil || tok != 6 {
				t.Fatalf("with empty tombstones: %v, token %d; the model should reproduce the repeat (token 6)", err, tok)
			}
		})
	}
}

// TestTombstonesUnique: every tombstone differs from every other, and reads
// as not found.
func TestTombstonesUnique(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	seen := map[string]bool{}
	for tok := uint64(1); tok <= 3; tok++ {
		for range 2 {
			if err := fence.Delete(ctx, s, "k", tok, fence.Options{}); err != nil {
				t.Fatal(err)
			}
			o, err := s.Get(ctx, "k", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(o.Data) == 0 || seen[string(o.Data)] {
				t.Fatalf("tombstone %q is empty or repeats", o.Data)
			}
			seen[string(o.Data)] = true
			if _, _, err := fence.Get(ctx, s, "k", 0); !errors.Is(err, providers.ErrNotFound) {
				t.Fatalf("get of a tombstone: %v, want ErrNotFound", err)
			}
		}
	}
}
