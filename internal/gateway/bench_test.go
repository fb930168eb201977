package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The benchmarks put the gateway beside the same TLS server reached
// directly, in one run, alternating request by request so that both see
// the same machine:
//
//	go test ./internal/gateway -run '^$' -bench 'AddedLatency|FirstByte' -benchtime 2000x
//	go test ./internal/gateway -run '^$' -bench OpenStreams -benchtime 5x
//
// (BenchmarkOpenStreams holds 200 streams in each iteration.)

const benchMessage = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello! How can I help you today?"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":9}}`

// benchPair is a provider reached two ways: direct (TLS, as the agent
// would without a gateway) and through a gateway (the agent's loopback
// hop, then TLS).
type benchPair struct {
	provider *httptest.Server
	gateway  *Gateway
	direct   *http.Client
	agent    *http.Client
	upstream *http.Client // the gateway's
	key      string
}

func newBenchPair(b *testing.B, answer http.HandlerFunc) *benchPair {
	b.Helper()
	srv := httptest.NewTLSServer(answer)
	placeholder := NewPlaceholder()
	// The gateway's own connections to the provider, apart from the
	// direct client's.
	upstream := &http.Client{Transport: srv.Client().Transport.(*http.Transport).Clone()}
	g, err := Start(Config{Provider: "anthropic", Upstream: srv.URL, Key: testKey, Placeholder: placeholder, Client: upstream})
	if err != nil {
		b.Fatal(err)
	}
	p := &benchPair{provider: srv, gateway: g, direct: srv.Client(), upstream: upstream,
		agent: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, key: placeholder}
	b.Cleanup(func() {
		g.Close()
		srv.Close()
	})
	return p
}

// post sends an Anthropic request to base and returns the answer, its
// headers read.
func (p *benchPair) post(b *testing.B, c *http.Client, base, body string) *http.Response {
	req, _ := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", p.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	return resp
}

// timed is the duration of each request, direct and through the gateway.
type timed struct{ direct, gateway []time.Duration }

func (t *timed) report(b *testing.B, what string) {
	pct := func(d []time.Duration, q float64) float64 {
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(q*float64(len(d))))].Nanoseconds()) / 1e3
	}
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}} {
		d, g := pct(t.direct, q.q), pct(t.gateway, q.q)
		b.ReportMetric(d, what+"-direct-"+q.name+"-us")
		b.ReportMetric(g, what+"-gateway-"+q.name+"-us")
		b.ReportMetric(g-d, what+"-added-"+q.name+"-us")
	}
}

// BenchmarkAddedLatency is a whole non-streamed request and answer.
func BenchmarkAddedLatency(b *testing.B) {
	p := newBenchPair(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, benchMessage)
	})
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	once := func(c *http.Client, base string) time.Duration {
		start := time.Now()
		resp := p.post(b, c, base, body)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}
	once(p.direct, p.provider.URL) // connections up before the clock
	once(p.agent, p.gateway.URL())
	var t timed
	b.ResetTimer()
	for b.Loop() {
		t.direct = append(t.direct, once(p.direct, p.provider.URL))
		t.gateway = append(t.gateway, once(p.agent, p.gateway.URL()))
	}
	t.report(b, "request")
}

// BenchmarkFirstByte is the time to the first byte of a streamed answer
// (the provider flushes its first event at once, then the rest).
func BenchmarkFirstByte(b *testing.B) {
	p := newBenchPair(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		for i := range 5 {
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word %d \"}}\n\n", i)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n")
	})
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	buf := make([]byte, 1)
	once := func(c *http.Client, base string) time.Duration {
		start := time.Now()
		resp := p.post(b, c, base, body)
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			b.Fatal(err)
		}
		ttfb := time.Since(start)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return ttfb
	}
	once(p.direct, p.provider.URL)
	once(p.agent, p.gateway.URL())
	var t timed
	b.ResetTimer()
	for b.Loop() {
		t.direct = append(t.direct, once(p.direct, p.provider.URL))
		t.gateway = append(t.gateway, once(p.agent, p.gateway.URL()))
	}
	t.report(b, "first-byte")
}

// BenchmarkOpenStreams holds streams open (the provider has sent its
// first event and waits) and measures the heap and goroutines each costs,
// direct and through the gateway. All sides are in this process: the
// agent's client, the gateway, the provider.
func BenchmarkOpenStreams(b *testing.B) {
	const streams = 200
	var release chan struct{}
	var mu sync.Mutex
	p := newBenchPair(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12}}}\n\n")
		w.(http.Flusher).Flush()
		mu.Lock()
		ch := release
		mu.Unlock()
		<-ch
	})
	p.direct.Transport.(*http.Transport).MaxIdleConnsPerHost = streams
	p.agent.Transport.(*http.Transport).MaxIdleConnsPerHost = streams
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	// hold opens n streams to base, and returns the heap and goroutines
	// they hold.
	hold := func(c *http.Client, base string) (heap, goroutines float64) {
		mu.Lock()
		release = make(chan struct{})
		mu.Unlock()
		p.quiet()
		heap0, g0 := liveHeap(), runtime.NumGoroutine()
		resps := make([]*http.Response, streams)
		for i := range resps {
			resps[i] = p.post(b, c, base, body)
			if _, err := resps[i].Body.Read(make([]byte, 1)); err != nil {
				b.Fatal(err)
			}
		}
		heap1, g1 := liveHeap(), runtime.NumGoroutine()
		close(release)
		for _, r := range resps {
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
		return float64(heap1-heap0) / streams, float64(g1-g0) / streams
	}
	var dh, dg, gh, gg float64
	b.ResetTimer()
	for b.Loop() {
		h, g := hold(p.direct, p.provider.URL)
		dh, dg = dh+h, dg+g
		h, g = hold(p.agent, p.gateway.URL())
		gh, gg = gh+h, gg+g
	}
	n := float64(b.N)
	b.ReportMetric(dh/n, "direct-heap-B/stream")
	b.ReportMetric(gh/n, "gateway-heap-B/stream")
	b.ReportMetric((gh-dh)/n, "added-heap-B/stream")
	b.ReportMetric(dg/n, "direct-goroutines/stream")
	b.ReportMetric(gg/n, "gateway-goroutines/stream")
}

// liveHeap is the heap in use after two collections (the second frees
// what sync.Pools held through the first).
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// quiet closes every idle connection and waits for their goroutines to
// end, so that a measurement starts from no connection at all.
func (p *benchPair) quiet() {
	for _, c := range []*http.Client{p.direct, p.agent, p.upstream} {
		c.CloseIdleConnections()
	}
	p.provider.CloseClientConnections()
	for n, i := runtime.NumGoroutine(), 0; i < 100; i++ {
		time.Sleep(5 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return
		}
		n = m
	}
}
