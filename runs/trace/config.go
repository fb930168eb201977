// Package trace exports each run of acpflow as one OpenTelemetry trace
// (docs/traces.md): a span for the run, its steps, attempts and for-each
// elements, the agent's start and turn, each tool call, permission
// decision, unasked call, sandbox refusal and model call through a
// gateway. It builds the trace from the run's events (a steps.Sink) and
// its result, so that what a trace says is what the run store and the
// result say, and it never holds up a run: spans go through a bounded
// queue, and a collector that is slow or absent costs a command at most
// ShutdownTimeout at its end.
package trace

import (
	"maps"
	"net/url"
	"strconv"
	"strings"

	"github.com/acpflow/acpflow/policies"
)

// The protocols a trace is exported with.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Config is where traces go and what they hold: an outer policy file's
// telemetry: over the standard OTEL_* variables.
type Config struct {
	// Endpoint is the collector's base URL (OTEL_EXPORTER_OTLP_ENDPOINT's
	// meaning: HTTP exports to its /v1/traces), or, with Signal, the
	// whole URL traces go to (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT's).
	Endpoint string
	Signal   bool
	Protocol string // ProtocolHTTP or ProtocolGRPC
	// Headers are sent with every export: OTEL_EXPORTER_OTLP_HEADERS',
	// its _TRACES_ form's, then the policy's.
	Headers map[string]string
	// Content lets prompts, messages, commands and model exchanges into
	// the trace.
	Content bool
	// TraceURL is where a trace is seen, {trace_id} standing for its id.
	TraceURL string
	// From says where the configuration came from, in messages.
	From string
}

// contentEnv is the GenAI semantic conventions' switch for message
// content, honoured when no outer policy says telemetry.content.
const contentEnv = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// TraceURLEnv sets the trace URL template when no outer policy does.
const TraceURLEnv = "ACPFLOW_TRACE_URL"

// Configure is the trace configuration of a command: the outer policy's
// telemetry (nil: none) over the environment (getenv). ok is false when
// traces are not exported: neither the policy nor OTEL_EXPORTER_OTLP_ENDPOINT
// (or its _TRACES_ form) asks for them, or OTEL_SDK_DISABLED or
// OTEL_TRACES_EXPORTER=none turns them off.
func Configure(tel *policies.Telemetry, getenv func(string) string) (cfg Config, ok bool) {
	if off, _ := strconv.ParseBool(getenv("OTEL_SDK_DISABLED")); off || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return Config{}, false
	}
	if tel == nil && firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return Config{}, false
	}
	cfg = Config{
		Protocol: firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
		TraceURL: URLTemplate(tel, getenv),
		From:     "$OTEL_EXPORTER_OTLP_ENDPOINT",
	}
	cfg.Content, _ = strconv.ParseBool(getenv(contentEnv))
	// The _TRACES_ form wins over the general one, the policy over both.
	cfg.Headers = parseHeaders(getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS"), parseHeaders(getenv("OTEL_EXPORTER_OTLP_HEADERS"), nil))
	cfg.Endpoint, cfg.Signal = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), true
	if cfg.Endpoint == "" {
		cfg.Endpoint, cfg.Signal = getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), false
	}
	if tel != nil {
		cfg.From = "telemetry: in " + tel.File
		cfg.Content = tel.Content
		if tel.Endpoint != "" {
			cfg.Endpoint, cfg.Signal = tel.Endpoint, false
		}
		if tel.Protocol != "" {
			cfg.Protocol = tel.Protocol
		}
		maps.Copy(cfg.Headers, tel.Headers)
	}
	if cfg.Protocol != ProtocolGRPC {
		cfg.Protocol = ProtocolHTTP
	}
	switch {
	case cfg.Endpoint == "": // telemetry: without an endpoint: the OTLP default
		cfg.Endpoint = "http://localhost:4318"
		if cfg.Protocol == ProtocolGRPC {
			cfg.Endpoint = "http://localhost:4317"
		}
	case !strings.Contains(cfg.Endpoint, "://"):
		// host:port, as gRPC endpoints are often given: TLS unless
		// OTEL_EXPORTER_OTLP_INSECURE says otherwise, as the SDK does.
		scheme := "https://"
		if insecure, _ := strconv.ParseBool(firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_INSECURE", "OTEL_EXPORTER_OTLP_INSECURE")); insecure {
			scheme = "http://"
		}
		cfg.Endpoint = scheme + cfg.Endpoint
	}
	return cfg, true
}

// parseHeaders adds the headers of an OTEL_EXPORTER_OTLP_HEADERS value
// (key=value,key2=value2, values URL-encoded) to into, made when nil.
func parseHeaders(s string, into map[string]string) map[string]string {
	if into == nil {
		into = map[string]string{}
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			continue
		}
		if dec, err := url.QueryUnescape(strings.TrimSpace(v)); err == nil {
			v = dec
		}
		into[strings.TrimSpace(k)] = v
	}
	return into
}

// firstSet is the first of the variables that is set, "" if none.
func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// URLTemplate is where a trace is seen, {trace_id} standing for its id:
// the outer policy's telemetry.trace-url, else $ACPFLOW_TRACE_URL; ""
// for none. `show` and the UI link with it.
func URLTemplate(tel *policies.Telemetry, getenv func(string) string) string {
	if tel != nil && tel.TraceURL != "" {
		return tel.TraceURL
	}
	return getenv(TraceURLEnv)
}

// Link is template with traceID in it, "" without either.
func Link(template, traceID string) string {
	if template == "" || traceID == "" {
		return ""
	}
	return strings.ReplaceAll(template, "{trace_id}", traceID)
}

// where names the collector for messages: the endpoint without user,
// query or fragment (a token may hide there).
func (c Config) where() string {
	u, err := url.Parse(c.Endpoint)
	if err != nil || u.Host == "" {
		return "the collector (" + c.From + ")"
	}
	return u.Scheme + "://" + u.Host + u.Path
}
