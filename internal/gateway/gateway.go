// Package gateway is a step's model gateway: a local endpoint of the
// model provider's API (Anthropic Messages, OpenAI Chat Completions and
// Responses, Gemini generateContent) that the agent is pointed at instead
// of the provider. It holds the provider key, which the agent never sees:
// the agent gets a placeholder, the gateway swaps it for the key on the
// way out, streams the answer back byte for byte, and meters the tokens
// the provider says it spent, so that usage and budgets rest on the
// provider's word rather than the agent's.
//
// One Gateway serves one step; it knows nothing of workflows, steps or
// budgets: the caller decides through Config.Allow and learns through
// Config.OnExchange. A Replay stands for the provider when a recorded
// step's agent runs again against its recorded answers.
package gateway

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Config is what a Gateway is started with. It is read once by Start and
// not changed after.
type Config struct {
	// Provider is the API the agent speaks: "anthropic", "openai" (Chat
	// Completions and Responses) or "gemini".
	Provider string
	// Upstream is the provider's base URL, e.g. https://api.anthropic.com
	// or https://api.openai.com/v1. Its path is kept: the gateway's URL
	// has the same path, so the agent builds its request URLs from
	// URL() exactly as it would from Upstream. It must be https, or
	// http to a loopback address (a local model server, tests).
	Upstream string
	// Key is the provider key. It is held in memory only and sent only to
	// Upstream, in the provider's own header.
	Key string
	// Placeholder is the key the agent is given (NewPlaceholder). A
	// request that carries any other credential, or none, is refused.
	Placeholder string
	// Prices overrides or extends the default price table
	// (DefaultPrices) by model. Nil keeps the defaults.
	Prices Prices
	// Allow is called before every request (and every retry) is
	// forwarded, from the requests' goroutines, several at once; a
	// non-nil error refuses it with the provider's quota error, saying
	// acpflow's budget was reached and quoting the error (which must not
	// hold a secret). Nil allows everything.
	Allow func() error
	// OnExchange is called once per request the agent made, when its
	// answer is finished (or refused), on the request's goroutine: it
	// must not block for long, nor call Close. The agent may have read
	// the whole answer just before. Nil drops them.
	OnExchange func(Exchange)
	// Record keeps the request and response bodies (keys removed,
	// bounded by RecordLimit) in each Exchange.
	Record bool
	// RecordLimit bounds each recorded body; 0 means 1 MiB.
	RecordLimit int
	// Retry retries an answer of 429, 503, 529 or "overloaded"; the zero
	// value does not retry.
	Retry Retry
	// Client's Transport carries the requests to Upstream (tests inject
	// their TLS roots). Its Timeout and CheckRedirect are not used: a
	// redirect goes back to the agent as it came, and a stream lasts as
	// long as the model writes. Nil uses a transport of the gateway's own.
	Client *http.Client
}

// Retry bounds how the gateway retries a provider's "try again later".
type Retry struct {
	// Attempts is the most requests made for one of the agent's,
	// the first included; 0 or 1 means no retry.
	Attempts int
	// Wait is the wait before the first retry, doubled for each next one;
	// 0 means 1s. A Retry-After (or retry-after-ms) in the answer is
	// used instead.
	Wait time.Duration
	// MaxWait caps every wait; 0 means 30s. An answer that asks for a
	// longer wait is passed to the agent instead of retried.
	MaxWait time.Duration
}

// Gateway is a running model gateway for one step.
type Gateway struct {
	cfg      Config
	provider provider
	upstream *url.URL
	ln       net.Listener
	srv      *http.Server
	proxy    *httputil.ReverseProxy
	prices   Prices
	secrets  *scrubber
	ownTrans bool // the transport is the gateway's own, closed with it
	trans    http.RoundTripper

	handlers  sync.WaitGroup
	closeOnce sync.Once

	mu      sync.Mutex
	usage   map[string]Usage
	closing bool // no request is counted in after it is set
	active  int  // requests counted in and not yet reported (Settle)
}

// closeGrace is how long Close lets the streams in flight finish before it
// cuts them.
const closeGrace = 5 * time.Second

// Start checks cfg and serves the gateway on 127.0.0.1 on a free port.
//
// # Notes
//
// No error from Start holds the key or the placeholder.
func Start(cfg Config) (*Gateway, error) {
	g, err := newGateway(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gateway: listen on loopback: %w", err)
	}
	g.ln = ln
	g.srv = &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go g.srv.Serve(ln)
	return g, nil
}

// newGateway validates cfg and builds everything but the listener.
func newGateway(cfg Config) (*Gateway, error) {
	p, ok := providers[cfg.Provider]
	if !ok {
		return nil, fmt.Errorf("gateway: provider %q is not one of anthropic, openai, gemini", cfg.Provider)
	}
	sc := newScrubber(cfg.Key, cfg.Placeholder)
	u, err := checkUpstream(cfg.Upstream)
	if err != nil {
		return nil, errors.New(sc.string(err.Error()))
	}
	switch {
	case cfg.Key == "":
		return nil, errors.New("gateway: no provider key")
	case !headerSafe(cfg.Key) || !headerSafe(cfg.Placeholder):
		return nil, errors.New("gateway: the provider key or the placeholder holds a control character or space (a stray newline?)")
	case len(cfg.Placeholder) < 16:
		return nil, errors.New("gateway: the placeholder is shorter than 16 characters; use NewPlaceholder")
	case cfg.Placeholder == cfg.Key:
		return nil, errors.New("gateway: the placeholder is the key itself")
	case cfg.Retry.Attempts < 0 || cfg.Retry.Wait < 0 || cfg.Retry.MaxWait < 0:
		return nil, errors.New("gateway: retry attempts and waits must not be negative")
	case cfg.RecordLimit < 0:
		return nil, errors.New("gateway: record limit must not be negative")
	}
	prices, err := DefaultPrices().With(cfg.Prices)
	if err != nil {
		return nil, err
	}
	if cfg.RecordLimit == 0 {
		cfg.RecordLimit = 1 << 20
	}
	g := &Gateway{cfg: cfg, provider: p, upstream: u, prices: prices, secrets: sc, usage: map[string]Usage{}}
	g.trans, g.ownTrans = transportOf(cfg.Client)
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		Transport:      &retrier{g: g},
		FlushInterval:  -1,
		ModifyResponse: g.meterResponse,
		ErrorHandler:   g.upstreamFailed,
		ErrorLog:       log.New(io.Discard, "", 0),
		BufferPool:     copyBuffers,
	}
	return g, nil
}

// checkUpstream parses the upstream URL: https anywhere, http only to a
// loopback address, so that the key never crosses a network in clear.
func checkUpstream(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("gateway: upstream %q is not an http(s) URL with a host", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("gateway: upstream %q: give the base URL only, without user, query or fragment", raw)
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return nil, fmt.Errorf("gateway: upstream %q: plain http is allowed to a loopback address only; use https", raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// headerSafe reports whether a key can be sent as a header value as it is.
func headerSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] == 0x7f {
			return false
		}
	}
	return true
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// transportOf is the client's transport, or a fresh one of the gateway's
// own (HTTP/2 where the provider offers it; no transparent
// decompression, so that what the agent gets is what the provider sent).
func transportOf(c *http.Client) (http.RoundTripper, bool) {
	if c != nil && c.Transport != nil {
		return c.Transport, false
	}
	if c != nil {
		return http.DefaultTransport, false
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	t.ForceAttemptHTTP2 = true
	return t, true
}

// NewPlaceholder returns a fresh random key for the agent: it looks like a
// key to the agent's client, opens nothing anywhere, and is told from any
// real key at a glance.
func NewPlaceholder() string {
	return "acpflow-placeholder-" + rand.Text()
}

// URL is the base URL to give the agent in place of Upstream: the same
// path on the gateway's loopback address.
func (g *Gateway) URL() string {
	return "http://" + g.ln.Addr().String() + g.upstream.EscapedPath()
}

// Port is the port of the gateway's loopback listener: a sandboxed
// agent's own listener (Serve) takes the same one, so that URL works
// inside the sandbox's network namespace too.
func (g *Gateway) Port() int {
	return g.ln.Addr().(*net.TCPAddr).Port
}

// Serve serves the gateway on ln too, until Close, which closes ln: a
// listener made where the agent can reach it and acpflow's loopback
// cannot be (a sandbox's network namespace, sandbox.NetworkGateway).
// Requests on it are the gateway's like any other, placeholder checked,
// metered and refused alike. After Close it closes ln at once.
func (g *Gateway) Serve(ln net.Listener) {
	go g.srv.Serve(ln)
}

// Usage is the gateway's metered totals so far, by model ("" when neither
// the request nor the answer named one).
func (g *Gateway) Usage() map[string]Usage {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]Usage, len(g.usage))
	for m, u := range g.usage {
		out[m] = u
	}
	return out
}

// Close stops taking requests, lets the answers in flight finish (for a
// few seconds, then cuts them), and returns when every request's
// OnExchange has been called. It is safe to call more than once.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		defer cancel()
		if g.srv.Shutdown(ctx) != nil {
			g.srv.Close()
		}
		g.mu.Lock()
		g.closing = true
		g.mu.Unlock()
		g.handlers.Wait()
		if g.ownTrans {
			g.trans.(*http.Transport).CloseIdleConnections()
		}
	})
	return nil
}

// add counts an exchange's usage in the model's total.
func (g *Gateway) add(model string, u Usage) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.usage[model]
	t.Add(u)
	g.usage[model] = t
}

// clamp keeps a count a provider sent within what every JSON reader holds
// exactly, and never negative.
func clamp(v int64) int64 {
	return max(0, min(v, 1<<53-1))
}
