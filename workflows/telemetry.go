package workflows

import (
	"net/url"
	"strings"

	"github.com/acpflow/acpflow/policies"
)

var telemetryKeys = []string{"endpoint", "protocol", "headers", "content", "trace-url"}

// telemetry reads an outer policy file's `telemetry:` (docs/traces.md):
// `telemetry: true` exports as the OTEL_* variables say; a mapping names
// the collector and what the trace may hold.
func (d *decoder) telemetry(n *node) *policies.Telemetry {
	t := &policies.Telemetry{File: d.file}
	if on, ok := n.value.(bool); ok && n.kind == scalarNode {
		if !on {
			return nil
		}
		return t
	}
	f := d.fields(n, "telemetry", telemetryKeys)
	if f == nil {
		return nil
	}
	if x := f["endpoint"]; x != nil {
		t.Endpoint = d.httpURL(x, "telemetry.endpoint", "http://localhost:4318")
	}
	if x := f["protocol"]; x != nil {
		if s, ok := d.str(x, "telemetry.protocol"); ok {
			if s != "http/protobuf" && s != "grpc" {
				d.at(x.pos, "telemetry.protocol: %q is not one acpflow exports with; write http/protobuf or grpc", s)
			}
			t.Protocol = s
		}
	}
	if x := f["headers"]; x != nil && d.mapping(x, "telemetry.headers") {
		t.Headers = map[string]string{}
		for i, k := range x.keys {
			name := k.value.(string)
			v, ok := d.text(x.vals[i], "telemetry.headers."+name)
			switch {
			case !ok:
			case !isHeaderName(name):
				d.at(k.pos, "telemetry.headers: %q is not an HTTP header name (letters, digits and -, as x-team-token)", name)
			case len(v) > maxHeaderValue || strings.ContainsAny(v, "\r\n\x00"):
				// The value is not quoted: it is often a token.
				d.at(x.vals[i].pos, "telemetry.headers.%s: a header value is one line of at most %d bytes", name, maxHeaderValue)
			default:
				t.Headers[name] = v
			}
		}
	}
	if x := f["content"]; x != nil {
		t.Content, _ = d.boolean(x, "telemetry.content")
	}
	if x := f["trace-url"]; x != nil {
		t.TraceURL = d.httpURL(x, "telemetry.trace-url", "http://localhost:16686/trace/{trace_id}")
		if t.TraceURL != "" && !strings.Contains(t.TraceURL, "{trace_id}") {
			d.at(x.pos, "telemetry.trace-url: %q has no {trace_id}, where each run's trace id goes", t.TraceURL)
		}
	}
	return t
}

// httpURL reads an http(s) URL with a host and no user in it (a
// password would end up in messages); example is one that would do.
func (d *decoder) httpURL(n *node, what, example string) string {
	s, ok := d.str(n, what)
	if !ok {
		return ""
	}
	u, err := url.Parse(strings.ReplaceAll(s, "{trace_id}", "x"))
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		d.at(n.pos, "%s: %q is not an http(s) URL with a host, e.g. %s", what, s, example)
		return ""
	case u.User != nil:
		d.at(n.pos, "%s: %q: leave the user and password out of the URL (put a token in telemetry.headers)", what, s)
		return ""
	}
	return s
}

// maxHeaderValue bounds a telemetry header's value: a token, not a file.
const maxHeaderValue = 8 << 10

// isHeaderName reports whether s is an HTTP header name (RFC 9110's
// token): one the exporter can send, rather than fail each export with.
func isHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
