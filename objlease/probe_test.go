package objlease_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/objlease/objlease/objlease"
	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// ignoringStore accepts conditional writes and ignores their conditions, as
// some S3-compatible servers do.
type ignoringStore struct{ *mem.Store }

func (s ignoringStore) current(ctx context.Context, key string) string {
	if a, err := s.Stat(ctx, key); err == nil {
		return a.Version
	}
	return ""
}

func (s ignoringStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	if v := s.current(ctx, key); v != "" {
		return s.Store.Replace(ctx, key, data, md, v)
	}
	return s.Store.Create(ctx, key, data, md)
}

func (s ignoringStore) Replace(ctx context.Context, key string, data []byte, md map[string]string, _ string) (providers.WriteResult, error) {
	return s.Create(ctx, key, data, md)
}

func (s ignoringStore) Delete(ctx context.Context, key, _ string) error {
	return s.Store.Delete(ctx, key, s.current(ctx, key))
}

func TestProbe(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	r, err := objlease.Probe(ctx, m, "probe/")
	if err != nil || len(r.Failures) != 0 {
		t.Fatalf("mem: %v %v", err, r.Failures)
	}
	if !r.ClockKnown || len(r.Latency["create"]) != 2 || len(r.Latency["replace"]) != 3 {
		t.Fatalf("report %+v", r)
	}
	if page, _ := m.List(ctx, "", "", 100); len(page.Objects) != 0 {
		t.Fatalf("probe left %d objects behind", len(page.Objects))
	}

	r, err = objlease.Probe(ctx, ignoringStore{mem.New()}, "probe/")
	if !errors.Is(err, objlease.ErrStoreUnsafe) {
		t.Fatalf("ignoring store: %v, want ErrStoreUnsafe", err)
	}
	for _, want := range []string{"If-None-Match: * ignored", "If-Match ignored", "replace of a missing object", "delete with a stale version"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	t.Log(err)
}
