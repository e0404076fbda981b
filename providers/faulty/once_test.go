package faulty_test

import (
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/objlease/objlease/providers"
	"github.com/objlease/objlease/providers/driver"
	"github.com/objlease/objlease/providers/faulty"
	"github.com/objlease/objlease/providers/mem"
)

// Fault injection sits between the portable Bucket and a driver: one
// request through a faulty store is checked and counted once, whatever
// the faults.
func TestChecksAndMetricsRunOnce(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	t.Cleanup(func() { otel.SetMeterProvider(prev) })

	inner := &keyCounter{Driver: mem.NewDriver()}
	f, err := faulty.New(inner, faulty.Config{Seed: 1, Ops: map[faulty.Op]faulty.Rates{faulty.Replace: {Throttled: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	var s providers.Store = providers.NewBucket(f)
	ctx := t.Context()
	res, err := s.Create(ctx, "k", []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Replace(ctx, "k", []byte("y"), nil, res.Version) // throttled by the injector
	s.Get(ctx, "/bad", 0)                              // refused by the key check

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "objlease.store.requests" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				op, _ := dp.Attributes.Value(attribute.Key("op"))
				outcome, _ := dp.Attributes.Value(attribute.Key("outcome"))
				got[op.AsString()+" "+outcome.AsString()] += dp.Value
				total += dp.Value
			}
		}
	}
	want := map[string]int64{"create ok": 1, "replace throttled": 1, "get invalid_key": 1}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s counted %d times, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if total != 3 {
		t.Errorf("3 requests counted %d times (all: %v)", total, got)
	}
	// The driver's own key check ran once for each key the portable
	// checks let through (not for "/bad").
	if n := inner.checks.Load(); n != 2 {
		t.Errorf("the driver's key check ran %d times for 2 requests", n)
	}
}

// keyCounter is a driver with a key check of its own that counts its calls.
type keyCounter struct {
	driver.Driver
	checks atomic.Int64
}

func (k *keyCounter) CheckKey(string) error { k.checks.Add(1); return nil }
