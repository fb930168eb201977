// Package otlpreceiver is an OTLP trace receiver for tests: what a
// collector receives, over HTTP (http/protobuf) or gRPC, decoded from the
// OTLP protobuf definitions, so that acpflow's traces are checked as a
// collector reads them and not through the SDK that wrote them. It also
// serves the collectors a run must survive: one that accepts connections
// and never answers.
package otlpreceiver

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// Span is a span as received.
type Span struct {
	TraceID, SpanID, ParentID string // hex; ParentID "" for a root
	Name                      string
	Kind                      tracepb.Span_SpanKind
	Attrs                     map[string]any
	Resource                  map[string]any
	StatusCode                tracepb.Status_StatusCode
	StatusMessage             string
	Start, End                time.Time
}

// Receiver keeps every span it receives.
type Receiver struct {
	// URL is the base URL to export to (OTEL_EXPORTER_OTLP_ENDPOINT).
	URL string
	// Headers are the headers of the last export (HTTP: as sent; gRPC:
	// the metadata).
	Headers map[string][]string

	mu       sync.Mutex
	requests []*collectorpb.ExportTraceServiceRequest
	close    func()
}

// StartHTTP serves OTLP/HTTP on a loopback port until Close.
func StartHTTP() (*Receiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "http://" + l.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(r.serveHTTP), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	r.close = func() { srv.Close() }
	return r, nil
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var m collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.keep(&m, req.Header)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (r *Receiver) keep(m *collectorpb.ExportTraceServiceRequest, h map[string][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, m)
	r.Headers = h
}

// grpcService is the receiver as an OTLP gRPC trace service.
type grpcService struct {
	collectorpb.UnimplementedTraceServiceServer
	r *Receiver
}

func (g grpcService) Export(ctx context.Context, m *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	g.r.keep(m, md)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// StartGRPC serves OTLP/gRPC on a loopback port until Close.
func StartGRPC() (*Receiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{URL: "http://" + l.Addr().String()}
	srv := grpc.NewServer()
	collectorpb.RegisterTraceServiceServer(srv, grpcService{r: r})
	go srv.Serve(l)
	r.close = srv.Stop
	return r, nil
}

// Close stops serving.
func (r *Receiver) Close() { r.close() }

// Spans are every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Span
	for _, m := range r.requests {
		for _, rs := range m.ResourceSpans {
			res := attrs(rs.GetResource().GetAttributes())
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					out = append(out, Span{
						TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
						ParentID: hex.EncodeToString(s.ParentSpanId), Name: s.Name, Kind: s.Kind,
						Attrs: attrs(s.Attributes), Resource: res,
						StatusCode: s.GetStatus().GetCode(), StatusMessage: s.GetStatus().GetMessage(),
						Start: time.Unix(0, int64(s.StartTimeUnixNano)), End: time.Unix(0, int64(s.EndTimeUnixNano)),
					})
				}
			}
		}
	}
	return out
}

// JSON is everything received, as OTLP JSON: what a check for a string
// that must appear nowhere reads (attributes, events, resource, names).
func (r *Receiver) JSON() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var buf bytes.Buffer
	for _, m := range r.requests {
		b, _ := protojson.Marshal(m)
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// attrs are OTLP attributes as Go values.
func attrs(kvs []*commonpb.KeyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		out[kv.Key] = value(kv.Value)
	}
	return out
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.Values {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

// Silent is a collector that accepts connections and never answers:
// every byte sent to it is read and dropped, until Close.
type Silent struct {
	URL string
	l   net.Listener
	mu  sync.Mutex
	cs  []net.Conn
}

// StartSilent listens on a loopback port.
func StartSilent() (*Silent, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Silent{URL: "http://" + l.Addr().String(), l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.cs = append(s.cs, c)
			s.mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	return s, nil
}

// Close stops listening and drops every connection.
func (s *Silent) Close() {
	s.l.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.cs {
		c.Close()
	}
}

// ClosedURL is the URL of a loopback port nothing listens on (it was
// listened on a moment ago, then closed).
func ClosedURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr, nil
}
