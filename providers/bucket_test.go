package providers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/mem"
)

// spy is a Driver that records the calls reaching it and answers with err
// (nil: a one-object store holding "abc").
type spy struct {
	calls []string
	err   error
	size  int64 // the size Read declares
	body  string
}

func (d *spy) Read(_ context.Context, key string, _ int64) (*driver.Reader, error) {
	d.calls = append(d.calls, "read "+key)
	if d.err != nil {
		return nil, d.err
	}
	return &driver.Reader{
		Attrs: providers.Attrs{Version: "v1", Size: d.size, Metadata: map[string]string{"Owner": "a", "X-Y": "b"}},
		Body:  io.NopCloser(strings.NewReader(d.body)),
	}, nil
}

func (d *spy) Stat(_ context.Context, key string) (*providers.Attrs, error) {
	d.calls = append(d.calls, "stat "+key)
	if d.err != nil {
		return nil, d.err
	}
	return &providers.Attrs{Version: "v1", Metadata: map[string]string{"Owner": "a"}}, nil
}

func (d *spy) Create(_ context.Context, key string, _ []byte, _ map[string]string) (providers.WriteResult, error) {
	d.calls = append(d.calls, "create "+key)
	return providers.WriteResult{Version: "v1"}, d.err
}

func (d *spy) Replace(_ context.Context, key string, _ []byte, _ map[string]string, v string) (providers.WriteResult, error) {
	d.calls = append(d.calls, "replace "+key+" "+v)
	return providers.WriteResult{Version: "v2"}, d.err
}

func (d *spy) Delete(_ context.Context, key, v string) error {
	d.calls = append(d.calls, "delete "+key+" "+v)
	return d.err
}

func (d *spy) List(_ context.Context, prefix, _ string, _ int) (providers.ListPage, error) {
	d.calls = append(d.calls, "list "+prefix)
	return providers.ListPage{}, d.err
}

func (d *spy) Properties() providers.Properties {
	return providers.Properties{Name: "spy", MaxKeyBytes: 8}
}
func (d *spy) As(any) bool  { return false }
func (d *spy) Close() error { return nil }

func TestBucketRefusesBeforeSending(t *testing.T) {
	d := &spy{}
	b := providers.NewBucket(d)
	ctx := t.Context()
	for _, key := range []string{"", "/a", "a\x00b", "a\nb", "bad\xff", "123456789"} {
		_, err := b.Create(ctx, key, nil, nil)
		if !errors.Is(err, providers.ErrInvalidKey) {
			t.Errorf("create %q: %v, want ErrInvalidKey", key, err)
		}
		_, err = b.Get(ctx, key, 0)
		if !errors.Is(err, providers.ErrInvalidKey) {
			t.Errorf("get %q: %v, want ErrInvalidKey", key, err)
		}
	}
	for _, name := range []string{"Owner", "x_y", "1st", "", "a b"} {
		_, err := b.Create(ctx, "k", nil, map[string]string{name: "v"})
		if !errors.Is(err, providers.ErrInvalidKey) || !strings.Contains(err.Error(), "metadata name") {
			t.Errorf("create with metadata name %q: %v, want ErrInvalidKey naming the metadata", name, err)
		}
	}
	_, err := b.Replace(ctx, "k", nil, nil, "")
	if !errors.Is(err, providers.ErrPrecondition) {
		t.Errorf("replace with an empty version: %v, want ErrPrecondition", err)
	}
	if err := b.Delete(ctx, "k", ""); !errors.Is(err, providers.ErrPrecondition) {
		t.Errorf("delete with an empty version: %v, want ErrPrecondition", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.Create(cancelled, "k", nil, nil)
	if !errors.Is(err, context.Canceled) || errors.Is(err, providers.ErrUnknownOutcome) {
		t.Errorf("create with a cancelled context: %v, want context.Canceled, outcome known", err)
	}
	if _, err := b.List(cancelled, "p/", "", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("list with a cancelled context: %v", err)
	}
	if len(d.calls) != 0 {
		t.Errorf("calls reached the driver: %q", d.calls)
	}
}

func TestBucketWrapsAndNormalises(t *testing.T) {
	d := &spy{err: providers.ErrNotFound}
	b := providers.NewBucket(d)
	_, err := b.Get(t.Context(), "k", 0)
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Op != "get" || pe.Key != "k" || !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("get: %v, want a *providers.Error for get \"k\" matching ErrNotFound", err)
	}
	// An *Error from the driver is not wrapped twice.
	d.err = providers.Wrap("stat", "k", providers.ErrNotFound, nil)
	_, err = b.Stat(t.Context(), "k")
	if got := err.Error(); strings.Count(got, `"k"`) != 1 {
		t.Errorf("stat: %q names the key more than once", got)
	}

	// A multi-line native message is put on one line; the native error
	// stays reachable.
	native := errors.New("googleapi: got HTTP response code 404 with body: Not Found\n")
	d.err = fmt.Errorf("%w: %w", providers.ErrNotFound, native)
	_, err = b.Get(t.Context(), "k", 0)
	if strings.Contains(err.Error(), "\n") || !errors.Is(err, native) || !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("get: %q, want one line that keeps the native error and the sentinel", err)
	}

	d.err, d.body, d.size = nil, "abc", 3
	o, err := b.Get(t.Context(), "k", 0)
	if err != nil {
		t.Fatal(err)
	}
	if o.Key != "k" || string(o.Data) != "abc" || o.Size != 3 || o.Metadata["owner"] != "a" || o.Metadata["x-y"] != "b" {
		t.Errorf("get: %+v, want key k, data abc, metadata keys lower-cased", o)
	}
	a, err := b.Stat(t.Context(), "k")
	if err != nil || a.Key != "k" || a.Metadata["owner"] != "a" {
		t.Errorf("stat: %+v, %v", a, err)
	}
}

func TestBucketReadBound(t *testing.T) {
	for _, tt := range []struct {
		name string
		size int64 // declared
		body string
		max  int64
		want error // nil: success
	}{
		{"declared over", 10, "0123456789", 5, providers.ErrTooLarge},
		{"undeclared over", -1, "0123456789", 5, providers.ErrTooLarge},
		{"undeclared within", -1, "01234", 5, nil},
		{"no bound", -1, "0123456789", 0, nil},
		{"short body", 10, "01234", 0, errors.New("declared")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := providers.NewBucket(&spy{size: tt.size, body: tt.body})
			o, err := b.Get(t.Context(), "k", tt.max)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("get: %v", err)
			case tt.want == nil && string(o.Data) != tt.body:
				t.Errorf("get: %q, want %q", o.Data, tt.body)
			case tt.want == providers.ErrTooLarge && !errors.Is(err, providers.ErrTooLarge):
				t.Errorf("get: %v, want ErrTooLarge", err)
			case tt.want != nil && tt.want != providers.ErrTooLarge && (err == nil || !strings.Contains(err.Error(), tt.want.Error())):
				t.Errorf("get: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	t.Cleanup(func() { otel.SetMeterProvider(prev) })

	s := mem.New()
	ctx := t.Context()
	res, _ := s.Create(ctx, "k", []byte("x"), nil)
	s.Create(ctx, "k", []byte("x"), nil) // precondition
	s.Get(ctx, "missing", 0)             // not_found
	s.Replace(ctx, "k", nil, nil, "")    // precondition, refused locally
	s.Replace(ctx, "k", nil, nil, res.Version)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "objlease.store.requests" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				store, _ := dp.Attributes.Value(attribute.Key("store"))
				op, _ := dp.Attributes.Value(attribute.Key("op"))
				outcome, _ := dp.Attributes.Value(attribute.Key("outcome"))
				got[store.AsString()+" "+op.AsString()+" "+outcome.AsString()] += dp.Value
			}
		}
	}
	want := map[string]int64{
		"mem create ok": 1, "mem create precondition": 1, "mem get not_found": 1,
		"mem replace precondition": 1, "mem replace ok": 1,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
}

func TestOutcome(t *testing.T) {
	for err, want := range map[error]string{
		nil:                          "ok",
		providers.ErrNoBucket:        "no_bucket",
		providers.ErrUnreachable:     "unreachable",
		providers.ErrPermission:      "permission",
		providers.ErrWrongEndpoint:   "wrong_endpoint",
		context.Canceled:             "canceled",
		errors.New("something else"): "error",
		providers.Wrap("get", "k", providers.ErrNotFound, nil): "not_found",
	} {
		if got := providers.Outcome(err); got != want {
			t.Errorf("Outcome(%v) = %q, want %q", err, got, want)
		}
	}
}
