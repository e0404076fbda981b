package providers

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// requests counts Bucket calls. Through the global MeterProvider, it is a
// no-op until the program installs one.
var requests, _ = otel.Meter("github.com/objlease/objlease/providers").Int64Counter(
	"objlease.store.requests",
	metric.WithDescription("store requests by operation and outcome"),
	metric.WithUnit("{request}"))

// outcomes in the order Outcome tests them: the first sentinel that
// matches names the outcome.
var outcomes = []struct {
	err  error
	name string
}{
	{ErrNotFound, "not_found"},
	{ErrPrecondition, "precondition"},
	{ErrConflict, "conflict"},
	{ErrThrottled, "throttled"},
	{ErrUnknownOutcome, "unknown_outcome"},
	{ErrTooLarge, "too_large"},
	{ErrInvalidKey, "invalid_key"},
	{ErrNoBucket, "no_bucket"},
	{ErrPermission, "permission"},
	{ErrUnreachable, "unreachable"},
	{ErrWrongEndpoint, "wrong_endpoint"},
	{context.Canceled, "canceled"},
	{context.DeadlineExceeded, "deadline"},
}

// Outcome names what err says about a store request, as the metric's
// outcome attribute does: "ok" for nil, then not_found, precondition,
// conflict, throttled, unknown_outcome, too_large, invalid_key, no_bucket,
// permission, unreachable, wrong_endpoint, canceled, deadline, or "error"
// for anything else.
func Outcome(err error) string {
	if err == nil {
		return "ok"
	}
	for _, o := range outcomes {
		if errors.Is(err, o.err) {
			return o.name
		}
	}
	return "error"
}

func (b *Bucket) record(ctx context.Context, op string, err *error) {
	if !requests.Enabled(ctx) {
		return
	}
	requests.Add(ctx, 1, metric.WithAttributes(
		attribute.String("store", b.d.Properties().Name),
		attribute.String("op", op),
		attribute.String("outcome", Outcome(*err))))
}
