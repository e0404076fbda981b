package mem_test

import (
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
	"github.com/objlease/objlease/providers/providertest"
)

func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Config{Bucket: mem.New(), MissingBucket: mem.New(), CreatesBuckets: true, As: &providertest.AsCheck{
		Store: func(s providers.Store) error {
			var b *providers.Bucket
			if !s.As(&b) || b != s {
				return errors.New("As(**providers.Bucket) did not reach the Bucket")
			}
			return nil
		},
	}})
}

func TestOpenURL(t *testing.T) {
	ctx := t.Context()
	// Named stores live as long as the process: a fresh name per run.
	name := strings.ToLower(rand.Text())
	a, key, err := providers.Open(ctx, "mem://"+name+"/leases/nightly")
	if err != nil {
		t.Fatal(err)
	}
	if key != "leases/nightly" {
		t.Errorf("key = %q, want %q", key, "leases/nightly")
	}
	b, key, err := providers.Open(ctx, "mem://"+name+"/leases/")
	if err != nil {
		t.Fatal(err)
	}
	if key != "leases/" {
		t.Errorf("key = %q, want %q", key, "leases/")
	}
	other, _, err := providers.Open(ctx, "mem://another/x")
	if err != nil {
		t.Fatal(err)
	}
	var sa, sb, so *providers.Bucket
	if !a.As(&sa) || !b.As(&sb) || !other.As(&so) {
		t.Fatal("As(**providers.Bucket) = false")
	}
	if sa != sb {
		t.Error("the same name opened two different stores")
	}
	if sa == so {
		t.Error("different names opened the same store")
	}
	var wrong *string
	if a.As(&wrong) {
		t.Error("As(**string) = true")
	}

	// What one opener writes, another sees.
	res, err := a.Create(ctx, "leases/nightly", []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Stat(ctx, "leases/nightly")
	if err != nil || st.Version != res.Version {
		t.Errorf("stat through second opener: %+v, %v", st, err)
	}

	for _, bad := range []string{"mem:///no-name", "mem:opaque", "mem://n/k?x=1", "mem://user@n/k"} {
		if _, _, err := providers.Open(ctx, bad); !errors.Is(err, providers.ErrBadURL) {
			t.Errorf("Open(%q) = %v, want ErrBadURL", bad, err)
		}
	}
}

func TestClock(t *testing.T) {
	written := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	now := written
	s := mem.New(mem.WithClock(func() time.Time { return now }))
	res, err := s.Create(t.Context(), "k", []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.LastModified.Equal(written) || !res.StoreTime.Equal(written) {
		t.Errorf("create: LastModified %v StoreTime %v, want %v", res.LastModified, res.StoreTime, written)
	}
	now = written.Add(time.Minute)
	a, err := s.Stat(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if !a.LastModified.Equal(written) || !a.StoreTime.Equal(now) {
		t.Errorf("stat: LastModified %v StoreTime %v, want %v and %v", a.LastModified, a.StoreTime, written, now)
	}
}

func TestInvalidKey(t *testing.T) {
	s := mem.New()
	for _, key := range []string{"", "/abs"} {
		_, err := s.Create(t.Context(), key, nil, nil)
		if !errors.Is(err, providers.ErrInvalidKey) {
			t.Errorf("create %q: %v, want ErrInvalidKey", key, err)
		}
	}
}
