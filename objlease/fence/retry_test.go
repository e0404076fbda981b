package fence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/objlease/objlease/objlease/fence"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// refusingStore refuses every conditional replace with refusal, whatever
// the version: Ceph RGW's 412 to a quoted current ETag, or a proxy that
// answers 409 to every racing write.
type refusingStore struct {
	providers.Store
	refusal  error
	requests atomic.Int64
}

func (s *refusingStore) Stat(ctx context.Context, key string) (*providers.Attrs, error) {
	s.requests.Add(1)
	return s.Store.Stat(ctx, key)
}

func (s *refusingStore) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	s.requests.Add(1)
	return s.Store.Get(ctx, key, max)
}

func (s *refusingStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, v string) (providers.WriteResult, error) {
	s.requests.Add(1)
	return providers.WriteResult{}, providers.Wrap("replace", key, s.refusal, nil)
}

// A store that refuses writes conditional on the version it shows ends a
// fenced write at once with ErrPreconditionRefused, and a store that
// answers every write with a conflict ends it after a bounded number of
// attempts, backing off: neither spins.
func TestFencedWritesDoNotSpin(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refusal  error
		want     error
		attempts int64 // replaces at most
		waited   time.Duration
	}{
		{"precondition on an unchanged version", providers.ErrPrecondition, fence.ErrPreconditionRefused, 2, 30 * time.Millisecond},
		{"conflict every time", providers.ErrConflict, providers.ErrConflict, 16, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				s := &refusingStore{Store: mem.New(), refusal: tc.refusal}
				if _, err := fence.Put(ctx, s.Store, "out/x", 1, []byte("a"), fence.Options{}); err != nil {
					t.Fatal(err)
				}
				for _, op := range []string{"put", "commit"} {
					s.requests.Store(0)
					start := time.Now()
					var err error
					if op == "put" {
						_, err = fence.Put(ctx, s, "out/x", 2, []byte("b"), fence.Options{})
					} else {
						b := fence.NewBatch(s.Store, "out/p/", 1)
						if err := b.Put(ctx, "a", []byte("a")); err != nil {
							t.Fatal(err)
						}
						if _, err := b.Commit(ctx, false); err != nil {
							t.Fatal(err)
						}
						b = fence.NewBatch(s, "out/p/", 2)
						_, err = b.Commit(ctx, false)
					}
					took := time.Since(start)
					if !errors.Is(err, tc.want) {
						t.Fatalf("%s: %v, want %v", op, err, tc.want)
					}
					if n := s.requests.Load(); n > 2*tc.attempts+1 {
						t.Errorf("%s: %d requests before giving up, want at most %d", op, n, 2*tc.attempts+1)
					}
					if took < tc.waited {
						t.Errorf("%s gave up after %v, want a back-off of at least %v", op, took, tc.waited)
					}
					t.Logf("%s: %v after %v and %d requests", op, err, took, s.requests.Load())
				}
			})
		})
	}
}
