package fence

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// refused counts fenced writes the store refused, by operation (put,
// delete, commit): objlease.fence.refused. A no-op until the program
// installs an OpenTelemetry MeterProvider.
var refused, _ = otel.Meter("github.com/objlease/objlease/fence").Int64Counter(
	"objlease.fence.refused", metric.WithDescription("fenced writes refused because of a stale token"))

func stale(op, key string, token, highest uint64) error {
	refused.Add(context.Background(), 1, metric.WithAttributes(attribute.String("op", op)))
	return &StaleError{Key: key, Token: token, Highest: highest}
}
