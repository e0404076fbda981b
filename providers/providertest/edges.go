package providertest

// This file holds the tests at the store's edges: a write cancelled before
// it is sent, a bucket that does not exist, and reaching the native client.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
)

// A write whose context is done before it is sent is never sent: it fails
// with the context's error, its outcome known (not ErrUnknownOutcome), and
// nothing changes.
func (s *suite) testCancelledBeforeSending(t *testing.T) {
	key := s.key("cancelled/obj")
	res := s.create(t, key, []byte("kept"), nil)
	fresh := s.key("cancelled/fresh")
	s.cleanup(t, fresh)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(op, key string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) || errors.Is(err, providers.ErrUnknownOutcome) {
			t.Errorf("%s %q with a cancelled context: %v, want context.Canceled and no ErrUnknownOutcome", op, key, err)
		}
		if err != nil {
			checkError(t, err, op, key)
		}
	}
	_, err := s.Bucket.Create(ctx, fresh, []byte("new"), nil)
	check("create", fresh, err)
	_, err = s.Bucket.Replace(ctx, key, []byte("changed"), nil, res.Version)
	check("replace", key, err)
	check("delete", key, s.Bucket.Delete(ctx, key, res.Version))

	checkObject(t, s.get(t, key), key, []byte("kept"), nil, res.Version)
	if _, err := s.Bucket.Stat(t.Context(), fresh); !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("stat %q after a cancelled create: %v, want ErrNotFound", fresh, err)
	}

	// Every call reports why its context ended (a lost lease, a signal),
	// not only that it did, whether it was cancelled or its deadline
	// passed.
	why := errors.New("the lease was lost")
	cancelled, cancelCause := context.WithCancelCause(t.Context())
	cancelCause(why)
	expired, stop := context.WithDeadlineCause(t.Context(), time.Now().Add(-time.Second), why)
	defer stop()
	for name, ctx := range map[string]context.Context{"cancelled": cancelled, "past its deadline": expired} {
		cause := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, why) {
				t.Errorf("%s with a context %s: %v, want the context's cause %q", op, name, err, why)
			}
		}
		_, err := s.Bucket.Create(ctx, fresh, []byte("new"), nil)
		cause("create", err)
		_, err = s.Bucket.Replace(ctx, key, []byte("changed"), nil, res.Version)
		cause("replace", err)
		cause("delete", s.Bucket.Delete(ctx, key, res.Version))
		_, err = s.Bucket.Get(ctx, key, 0)
		cause("get", err)
		_, err = s.Bucket.Stat(ctx, key)
		cause("stat", err)
		_, err = s.Bucket.List(ctx, s.key("cancelled/"), "", 10)
		cause("list", err)
	}
}

// A bucket that does not exist is ErrNoBucket, not a missing object: a
// lease in a bucket nobody created must not read as "free".
func (s *suite) testMissingBucket(t *testing.T) {
	st := s.MissingBucket
	ctx := t.Context()
	key := s.key("nobucket/obj")
	if s.CreatesBuckets {
		if _, err := st.Get(ctx, key, 0); !errors.Is(err, providers.ErrNotFound) {
			t.Fatalf("get %q in a namespace nobody made: %v, want ErrNotFound", key, err)
		}
		if _, err := st.Create(ctx, key, []byte("x"), nil); err != nil {
			t.Fatalf("create %q in a namespace nobody made: %v", key, err)
		}
		page, err := st.List(ctx, s.key("nobucket/"), "", 10)
		if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != key {
			t.Fatalf("list after the create: %+v, %v, want %q alone", page, err, key)
		}
		return
	}
	_, err := st.Get(ctx, key, 0)
	wantErr(t, err, "get", key, providers.ErrNoBucket)
	_, err = st.Stat(ctx, key)
	wantErr(t, err, "stat", key, providers.ErrNoBucket)
	_, err = st.Create(ctx, key, []byte("x"), nil)
	wantErr(t, err, "create", key, providers.ErrNoBucket)
	// A version of the store's own form, so that none is refused unsent.
	version := s.create(t, s.key("nobucket/real"), []byte("x"), nil).Version
	_, err = st.Replace(ctx, key, []byte("x"), nil, version)
	wantErr(t, err, "replace", key, providers.ErrNoBucket)
	// S3's Delete asks HEAD first, whose bare 404 cannot name the bucket.
	err = st.Delete(ctx, key, version)
	if !errors.Is(err, providers.ErrNoBucket) && !errors.Is(err, providers.ErrPrecondition) {
		t.Errorf("delete %q: %v, want ErrNoBucket (or ErrPrecondition where the store cannot tell)", key, err)
	}
	_, err = st.List(ctx, s.key("nobucket/"), "", 10)
	wantErr(t, err, "list", s.key("nobucket/"), providers.ErrNoBucket)
}

func (s *suite) testAs(t *testing.T) {
	var nothing *struct{ unknown int }
	if s.Bucket.As(&nothing) {
		t.Error("As accepted a target of no type the store knows")
	}
	if s.As == nil {
		return
	}
	if s.As.Store != nil {
		if err := s.As.Store(s.Bucket); err != nil {
			t.Errorf("As: %v", err)
		}
	}
	if s.As.Error != nil {
		key := s.key("as/missing")
		_, err := s.Bucket.Get(t.Context(), key, 0)
		if err == nil {
			t.Fatalf("get %q: success, want ErrNotFound", key)
		}
		if err := s.As.Error(err); err != nil {
			t.Errorf("errors.As on %v: %v", key, err)
		}
	}
}
