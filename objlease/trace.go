package objlease

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Spans go through the OpenTelemetry global TracerProvider, a no-op until
// the program installs one (otel.SetTracerProvider):
//
//	objlease.acquire  one attempt to take the lease (TryAcquire; Acquire makes one per attempt)
//	objlease.renew    one renewal
//	objlease.release  a release
//
// Each carries the attributes lease (the key), outcome (acquired, held,
// renewed, released, error) and, once known, token. A lease held by
// another holder is an outcome, not an error.
var tracer = otel.Tracer("github.com/objlease/objlease")

// startSpan starts the span name for the client's lease.
func (c *Client) startSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	ctx, span := tracer.Start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("lease", c.key))
	}
	return ctx, span
}

// endSpan ends span with the outcome ok, or "held" or "error" by err, and
// the token when not 0.
func endSpan(span trace.Span, ok string, token uint64, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	outcome := ok
	switch {
	case errors.Is(err, ErrHeld):
		outcome = "held"
	case err != nil:
		outcome = "error"
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(attribute.String("outcome", outcome))
	if token != 0 {
		span.SetAttributes(attribute.Int64("token", int64(token)))
	}
	span.End()
}
