package objlease_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/objlease/objlease/objlease/clock"
	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	ctx := context.Background()
	m, h := newMem()
	clk := clock.NewFake(epoch)
	l, err := newClient(t, h, "a", clk).TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A renewal that takes 30 ms by the client's clock.
	h.setHooks(func(op, key string) error {
		if op == "replace" {
			clk.Advance(30 * time.Millisecond)
		}
		return nil
	}, nil)
	if err := l.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	h.setHooks(nil, nil)
	if _, err := newClient(t, m, "op", clk).Break(ctx); err != nil {
		t.Fatal(err)
	}
	l.Renew(ctx) // refused: lost

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if c, ok := p.Attributes.Value("cause"); ok {
						got[mt.Name+"/"+c.AsString()] += p.Value
					} else {
						got[mt.Name] += p.Value
					}
				}
			case metricdata.Gauge[int64]:
				got[mt.Name] = d.DataPoints[0].Value
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[mt.Name] += int64(p.Count)
					// Seconds, not OpenTelemetry's default boundaries
					// (0, 5, 10, ... 10000), which are for milliseconds.
					if len(p.Bounds) == 0 || p.Bounds[0] != 0.005 || p.Bounds[len(p.Bounds)-1] != 30 {
						t.Errorf("%s: bucket boundaries %v, want seconds from 0.005 to 30", mt.Name, p.Bounds)
					}
					if o, _ := p.Attributes.Value("outcome"); o.AsString() == "ok" {
						// The 30 ms renewal, in the bucket (0.025, 0.05].
						i := slices.Index(p.Bounds, 0.05)
						if p.Count != 1 || i < 1 || p.Bounds[i-1] != 0.025 || p.BucketCounts[i] != 1 {
							t.Errorf("%s: a 30 ms renewal: count %d in buckets %v of %v, want 1 in (0.025, 0.05]", mt.Name, p.Count, p.BucketCounts, p.Bounds)
						}
					}
				}
			}
		}
	}
	want := map[string]int64{
		"objlease.lease.acquisitions":   1,
		"objlease.lease.held":           0,
		"objlease.lease.token":          1,
		"objlease.lease.losses/refused": 1,
		"objlease.lease.renew.duration": 2,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}
