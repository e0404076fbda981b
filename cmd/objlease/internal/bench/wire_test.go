package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/mem"
)

// wireStore is a store whose every call sends requests through the
// transport its opener was given, as an SDK client does: each write two
// (a lookup and the write), each read one.
type wireStore struct {
	providers.Store
	rt  http.RoundTripper
	url string
}

func (w *wireStore) send(ctx context.Context, n int) {
	for range n {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.url, nil)
		if resp, err := w.rt.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
}

func (w *wireStore) Get(ctx context.Context, key string, max int64) (*providers.Object, error) {
	w.send(ctx, 1)
	return w.Store.Get(ctx, key, max)
}

func (w *wireStore) Create(ctx context.Context, key string, data []byte, md map[string]string) (providers.WriteResult, error) {
	w.send(ctx, 2)
	return w.Store.Create(ctx, key, data, md)
}

// The bench counts what goes on the wire under the SDK client, not the
// store calls: a call that sends two requests counts two.
func TestCountsWireRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	open := func(ctx context.Context, rawURL string, opts providers.OpenOptions) (providers.Store, string, error) {
		rt, ok := opts.RoundTripper(http.DefaultTransport)
		if !ok {
			t.Error("the bench opened the store without a counting transport")
		}
		return &wireStore{Store: mem.New(), rt: rt, url: srv.URL}, "p/", nil
	}
	cs, _, err := openCounted(t.Context(), open, "wire://b/p/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Create(t.Context(), "p/k", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Get(t.Context(), "p/k", 0); err != nil {
		t.Fatal(err)
	}
	if c := cs.counts(); c[opCreate] != 2 || c[opGet] != 1 || c.total() != 3 {
		t.Errorf("counts %v, want 2 creates and 1 get on the wire", c)
	}
}

// A store without a wire (file, mem) counts its calls.
func TestCountsCallsWithoutWire(t *testing.T) {
	open := func(ctx context.Context, rawURL string, _ providers.OpenOptions) (providers.Store, string, error) {
		return mem.New(), "", nil
	}
	cs, _, err := openCounted(t.Context(), open, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	cs.Create(t.Context(), "k", []byte("x"), nil)
	cs.Get(t.Context(), "k", 0)
	if c := cs.counts(); c[opCreate] != 1 || c[opGet] != 1 {
		t.Errorf("counts %v, want one create and one get", c)
	}
}
