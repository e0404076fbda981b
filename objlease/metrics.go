package objlease

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics go through the OpenTelemetry global MeterProvider: they cost a
// no-op call each until the program installs one (otel.SetMeterProvider).
//
//	objlease.lease.held          gauge, 1 while this process holds the lease, else 0
//	objlease.lease.token         gauge, the token of the held lease
//	objlease.lease.acquisitions  counter
//	objlease.lease.losses        counter, attribute cause = refused | expired | release_failed
//	objlease.lease.renew.duration histogram, seconds (buckets 5 ms to 30 s), attribute outcome = ok | error
//
// Every measurement carries the attribute lease = the lease key.
type instruments struct {
	held, token  metric.Int64Gauge
	acquisitions metric.Int64Counter
	losses       metric.Int64Counter
	renew        metric.Float64Histogram
}

var meters = func() instruments {
	m := otel.Meter("github.com/objlease/objlease")
	var in instruments
	// Errors here only mean a misconfigured provider; the instruments are
	// then no-ops, which is the right failure for telemetry.
	in.held, _ = m.Int64Gauge("objlease.lease.held", metric.WithDescription("1 while this process holds the lease"))
	in.token, _ = m.Int64Gauge("objlease.lease.token", metric.WithDescription("fencing token of the held lease"))
	in.acquisitions, _ = m.Int64Counter("objlease.lease.acquisitions", metric.WithDescription("leases acquired"))
	in.losses, _ = m.Int64Counter("objlease.lease.losses", metric.WithDescription("leases lost, by cause"))
	in.renew, _ = m.Float64Histogram("objlease.lease.renew.duration", metric.WithUnit("s"), metric.WithDescription("latency of renewals"),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	return in
}()

// durationBuckets are the histogram boundaries, in seconds, of every
// duration objlease measures. OpenTelemetry's default boundaries (0, 5,
// 10, 25, ... 10000) are meant for milliseconds: in seconds they put every
// store request in the first bucket. A conditional write to an object
// store takes from a few milliseconds (a local or same-zone store) through
// 20 to 200 ms (S3, GCS, Azure across a region) to seconds when the store
// throttles or retries; a renewal is in trouble once it takes a sizeable
// part of TTL/3, and the TTL is 30 s by default. The boundaries resolve the
// usual 5 ms to 1 s finely and keep 2.5 to 30 s apart for the slow tail.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// leaseMetrics records the measurements of one lease key.
type leaseMetrics struct{ lease attribute.KeyValue }

func newLeaseMetrics(key string) leaseMetrics { return leaseMetrics{attribute.String("lease", key)} }

func (m leaseMetrics) acquired(token uint64) {
	set := metric.WithAttributes(m.lease)
	meters.acquisitions.Add(context.Background(), 1, set)
	meters.held.Record(context.Background(), 1, set)
	meters.token.Record(context.Background(), int64(token), set)
}

func (m leaseMetrics) ended(cause error) {
	ctx := context.Background()
	meters.held.Record(ctx, 0, metric.WithAttributes(m.lease))
	if errors.Is(cause, ErrReleased) {
		return
	}
	kind := "expired"
	switch {
	case errors.Is(cause, errRefused):
		kind = "refused"
	case errors.Is(cause, errReleaseFailed):
		kind = "release_failed"
	}
	meters.losses.Add(ctx, 1, metric.WithAttributes(m.lease, attribute.String("cause", kind)))
}

func (m leaseMetrics) renewed(d time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	meters.renew.Record(context.Background(), d.Seconds(), metric.WithAttributes(m.lease, attribute.String("outcome", outcome)))
}

// Internal causes, wrapped inside ErrLeaseLost, that tell losses apart.
var (
	errRefused       = errors.New("the record changed under this holder")
	errReleaseFailed = errors.New("release failed")
)
