package trace

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/acpflow/acpflow/internal/version"
)

// ShutdownTimeout bounds what exporting costs a command at its end: the
// spans still queued are sent within it, or dropped and counted. It is
// the most a dead or silent collector adds to a run (docs/traces.md has
// the figures).
const ShutdownTimeout = 2 * time.Second

// MaxAttributeValue bounds each string attribute of a span, unless
// OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT sets another bound: a model
// exchange or a command an agent wrote can be megabytes, and the SDK
// bounds nothing by default, so one span could outgrow what a collector
// takes in an export (gRPC's 4 MiB) and lose the batch it travels in.
const MaxAttributeValue = 64 << 10

// Tracer exports the traces of one command's runs: one SDK provider and
// its batch queue, shared by every run of a batch.
type Tracer struct {
	cfg      Config
	where    string
	provider *sdktrace.TracerProvider
	tracer   oteltrace.Tracer
	secrets  []string // the configured header values: never in a message

	ended, exported atomic.Int64 // spans ended, spans the collector took
	mu              sync.Mutex
	firstErr        string // the first export error, scrubbed
}

// New starts exporting with cfg (Configure). Nothing is sent yet: an
// unreachable collector is no error here, only at Close's report.
//
// # Notes
//
// The SDK reports a failed export to its process-wide error handler,
// whose default prints a line on stderr at each failure, through the
// view's lines. New replaces it with one that drops them: the exporter's
// wrapper has seen each error already, and Close reports the first. It
// is the one global New touches, and every acpflow process that exports
// wants it so.
func New(ctx context.Context, cfg Config, getenv func(string) string) (*Tracer, error) {
	t := &Tracer{cfg: cfg, where: cfg.where()}
	for _, v := range cfg.Headers {
		t.secrets = append(t.secrets, v)
	}
	exp, err := newExporter(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("traces (%s): %w", cfg.From, err)
	}
	// The SDK reports export errors to a global handler, which prints
	// them on stderr as they happen; Close reports them once instead.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.version", version.Version)))
	if err != nil {
		res = resource.Default()
	}
	if getenv("OTEL_SERVICE_NAME") == "" && !strings.Contains(getenv("OTEL_RESOURCE_ATTRIBUTES"), "service.name=") {
		res, _ = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", "acpflow")))
	}
	// The SDK's batch queue is bounded (OTEL_BSP_MAX_QUEUE_SIZE, 2048) and
	// drops rather than blocks when full; counting wraps it on both sides.
	bsp := sdktrace.NewBatchSpanProcessor(&countingExporter{SpanExporter: exp, t: t})
	limits := sdktrace.NewSpanLimits()
	if limits.AttributeValueLengthLimit < 0 { // OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT unset
		limits.AttributeValueLengthLimit = MaxAttributeValue
	}
	t.provider = sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithRawSpanLimits(limits),
		sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(&countingProcessor{SpanProcessor: bsp, t: t}),
	)
	t.tracer = t.provider.Tracer("github.com/acpflow/acpflow")
	return t, nil
}

// newExporter is the OTLP exporter cfg names. Retries are off: a trace is
// worth less than the run's time, and a retrying exporter would spend
// all of ShutdownTimeout on a closed port.
func newExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	if cfg.Protocol == ProtocolGRPC {
		return otlptracegrpc.New(ctx, otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}),
			otlptracegrpc.WithEndpointURL(cfg.Endpoint), otlptracegrpc.WithHeaders(cfg.Headers))
	}
	u := cfg.Endpoint
	if !cfg.Signal {
		u = strings.TrimRight(u, "/") + "/v1/traces"
	}
	return otlptracehttp.New(ctx, otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
		otlptracehttp.WithEndpointURL(u), otlptracehttp.WithHeaders(cfg.Headers))
}

// Close sends what is queued, within ShutdownTimeout, and says once what
// did not reach the collector: "" when every span did.
func (t *Tracer) Close() string {
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := t.provider.Shutdown(ctx); err != nil {
		t.exportFailed(err)
	}
	lost := t.ended.Load() - t.exported.Load()
	if lost <= 0 {
		return ""
	}
	t.mu.Lock()
	why := t.firstErr
	t.mu.Unlock()
	if why == "" {
		why = "the queue was full"
	}
	return fmt.Sprintf("traces: %d of %d spans were not exported to %s (%s); the runs are unaffected",
		lost, t.ended.Load(), t.where, why)
}

// exportFailed keeps the first export error for Close's report, without
// the header values.
func (t *Tracer) exportFailed(err error) {
	msg := err.Error()
	for _, s := range t.secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "[redacted]")
		}
	}
	t.mu.Lock()
	if t.firstErr == "" {
		t.firstErr = msg
	}
	t.mu.Unlock()
}

var (
	_ sdktrace.SpanProcessor = (*countingProcessor)(nil)
	_ sdktrace.SpanExporter  = (*countingExporter)(nil)
)

// countingProcessor counts the spans ended, whether the queue takes them
// or drops them.
type countingProcessor struct {
	sdktrace.SpanProcessor
	t *Tracer
}

func (p *countingProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	p.t.ended.Add(1)
	p.SpanProcessor.OnEnd(s)
}

// countingExporter counts the spans the collector took and keeps the
// first error.
type countingExporter struct {
	sdktrace.SpanExporter
	t *Tracer
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		e.t.exportFailed(err)
		return err
	}
	e.t.exported.Add(int64(len(spans)))
	return nil
}
