package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// telemetry is one command's OpenTelemetry set-up: the Prometheus
// registry --http serves, and the OTLP exporters the standard OTEL_*
// environment variables turn on. Each part is nil when off: with neither
// --http nor OTEL_METRICS_EXPORTER / OTEL_TRACES_EXPORTER=otlp nothing is
// installed, and the library's metrics and spans stay no-op calls.
type telemetry struct {
	mp  *sdkmetric.MeterProvider
	tp  *sdktrace.TracerProvider
	reg *prometheus.Registry // --http's /metrics
	// otlp: OTLP metrics or spans are exported, so the final flush has
	// somewhere to send them, for at most timeout.
	otlp    bool
	timeout time.Duration
}

// flushTimeout bounds the final export before the process exits: a
// collector that cannot be reached delays the exit by this much at most
// (less if OTEL_EXPORTER_OTLP_TIMEOUT is shorter).
const flushTimeout = 5 * time.Second

// otelConfig is what the OTEL_* environment variables ask of objlease.
type otelConfig struct {
	metrics, traces bool // OTEL_METRICS_EXPORTER, OTEL_TRACES_EXPORTER = otlp
	timeout         time.Duration
}

// readOTelEnv reads the standard OpenTelemetry environment variables
// objlease acts on itself; the OTLP exporters read the endpoint, headers,
// timeout, compression and certificate variables, and the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. Unlike an SDK's default,
// an unset OTEL_METRICS_EXPORTER or OTEL_TRACES_EXPORTER is "none": a
// command-line tool sends nothing anywhere unless asked. What objlease
// cannot do (OTLP over gRPC or JSON, another exporter) is an error rather
// than telemetry silently lost.
func readOTelEnv(getenv func(string) string) (otelConfig, error) {
	cfg := otelConfig{timeout: flushTimeout}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return cfg, nil
	}
	var err error
	if cfg.metrics, err = exporterOn(getenv, "OTEL_METRICS_EXPORTER"); err != nil {
		return cfg, err
	}
	if cfg.traces, err = exporterOn(getenv, "OTEL_TRACES_EXPORTER"); err != nil {
		return cfg, err
	}
	for _, s := range []struct {
		on     bool
		signal string
	}{{cfg.metrics, "METRICS"}, {cfg.traces, "TRACES"}} {
		if !s.on {
			continue
		}
		for _, name := range []string{"OTEL_EXPORTER_OTLP_" + s.signal + "_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
			p := strings.TrimSpace(getenv(name))
			if p == "" {
				continue
			}
			if p != "http/protobuf" {
				return cfg, usagef("%s=%s: not supported: objlease sends OTLP over HTTP with protobuf only; set it to http/protobuf (a collector's OTLP/HTTP port is 4318), or leave it unset", name, p)
			}
			break
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"} {
		if ms, err := strconv.Atoi(strings.TrimSpace(getenv(name))); err == nil && ms > 0 {
			cfg.timeout = min(cfg.timeout, time.Duration(ms)*time.Millisecond)
		}
	}
	return cfg, nil
}

// exporterOn reads OTEL_METRICS_EXPORTER or OTEL_TRACES_EXPORTER, a
// comma-separated list: "otlp" turns the export on, "none" (which wins)
// or nothing leaves it off, anything else is an error.
func exporterOn(getenv func(string) string, name string) (bool, error) {
	v := getenv(name)
	on := false
	for e := range strings.SplitSeq(v, ",") {
		switch strings.TrimSpace(e) {
		case "":
		case "none":
			return false, nil
		case "otlp":
			on = true
		default:
			return false, usagef("%s=%s: not supported: objlease exports otlp (over HTTP), or none; --http serves the metrics to Prometheus", name, v)
		}
	}
	return on, nil
}

// startTelemetry installs the MeterProvider and TracerProvider that
// --http (prom) and the OTEL_* environment variables ask for, as the
// OpenTelemetry globals the library records through. It returns nil when
// nothing is asked for. Its shutdown flushes what is recorded.
func (c *cli) startTelemetry(ctx context.Context, prom bool) (*telemetry, error) {
	cfg, err := readOTelEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if !prom && !cfg.metrics && !cfg.traces {
		return nil, nil
	}
	t := &telemetry{otlp: cfg.metrics || cfg.traces, timeout: cfg.timeout}
	// What the SDK cannot do while the command runs (an export that
	// failed, to be tried again at the next interval) is for -v; the
	// final export's failure is a warning (shutdown).
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		c.log.Debug("telemetry", slog.Any("err", err))
	}))
	res := c.telemetryResource(ctx)
	var opts []sdkmetric.Option
	if prom {
		t.reg = prometheus.NewRegistry()
		// The Go runtime's and the process's metrics (go_*, process_*),
		// as every Prometheus target serves them.
		t.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exp, err := otelprom.New(otelprom.WithRegisterer(t.reg))
		if err != nil {
			return nil, err
		}
		opts = append(opts, sdkmetric.WithReader(exp))
	}
	if cfg.metrics {
		exp, err := otlpmetrichttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP metrics exporter: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if len(opts) > 0 {
		t.mp = sdkmetric.NewMeterProvider(append(opts, sdkmetric.WithResource(res))...)
		otel.SetMeterProvider(t.mp)
	}
	if cfg.traces {
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			t.shutdown(c)
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		otel.SetTracerProvider(t.tp)
	}
	return t, nil
}

// telemetryResource describes this process: service.name objlease (or
// OTEL_SERVICE_NAME, or service.name in OTEL_RESOURCE_ATTRIBUTES), its
// version, and the attributes OTEL_RESOURCE_ATTRIBUTES adds.
func (c *cli) telemetryResource(ctx context.Context) *resource.Resource {
	base := resource.NewSchemaless(
		attribute.String("service.name", "objlease"),
		attribute.String("service.version", buildVersion().Version))
	env, err := resource.New(ctx, resource.WithFromEnv())
	if err != nil {
		c.log.Warn("OTEL_RESOURCE_ATTRIBUTES or OTEL_SERVICE_NAME only partly understood", slog.Any("err", err))
	}
	if env == nil {
		return base
	}
	res, err := resource.Merge(base, env)
	if err != nil {
		return base
	}
	return res
}

// shutdown exports what is left and stops the exporters, waiting at most
// t.timeout in all; an export that fails or does not finish in time is a
// warning, never a change of the command's exit status. It is safe on nil.
func (t *telemetry) shutdown(c *cli) {
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	var errs []error
	// Spans first: the command's span has just ended.
	if t.tp != nil {
		errs = append(errs, t.tp.ForceFlush(ctx), t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.ForceFlush(ctx), t.mp.Shutdown(ctx))
	}
	err := errors.Join(errs...)
	if err == nil || !t.otlp {
		return
	}
	c.log.Debug("telemetry", slog.Any("err", err))
	why := err.Error()
	var ne *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		why = fmt.Sprintf("no answer from the collector in %v", t.timeout)
	case errors.As(err, &ne):
		why = "cannot reach the collector: " + listenReason(ne)
	}
	c.log.Warn("metrics and spans not exported before exit: "+why, slog.String("endpoint", otlpEndpoint(os.Getenv)))
}

// otlpEndpoint is where the OTLP exporters send, as the variables say,
// for messages.
func otlpEndpoint(getenv func(string) string) string {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := getenv(name); v != "" {
			return v
		}
	}
	return "https://localhost:4318"
}

// noTelemetry are the commands that record nothing worth exporting.
var noTelemetry = []string{"help", "version", "completion"}

// spanContext is ctx, which carries no span, with the command's span as
// the parent of spans started in it.
func (c *cli) spanContext(ctx context.Context) context.Context {
	if !c.span.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, c.span)
}

// tracer makes the command's span; the library's spans are its children.
var tracer = otel.Tracer("github.com/objlease/objlease/cmd/objlease")

// traced runs act for cmd under telemetry: the exporters started, a span
// for the whole command, and everything flushed before it returns, on
// every path out of the command.
func (c *cli) traced(ctx context.Context, cmd *command, fs *flagSet, pos []string, act action) error {
	if cmd.hidden || slices.Contains(noTelemetry, cmd.name) {
		return act(ctx, pos)
	}
	t, err := c.startTelemetry(ctx, fs.isSet("http"))
	if err != nil {
		return err
	}
	if t == nil {
		return act(ctx, pos)
	}
	c.tel = t
	defer func() {
		c.tel, c.span = nil, trace.SpanContext{}
		t.shutdown(c)
	}()
	name := "objlease " + cmd.name
	if len(pos) > 0 && slices.Contains(cmd.subcommands, pos[0]) {
		name += " " + pos[0]
	}
	ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
	c.span = span.SpanContext()
	err = act(ctx, pos)
	code := exitCodeOf(err)
	span.SetAttributes(attribute.Int("process.exit.code", code))
	if err != nil && code != 0 {
		span.SetStatus(codes.Error, describe(err))
	}
	span.End()
	return err
}
