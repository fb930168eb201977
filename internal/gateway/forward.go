package gateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxRequestBody bounds a request the gateway holds (it keeps the body
// for a retry): above the providers' own limits (Anthropic's is 32 MB).
const maxRequestBody = 64 << 20

// exchange is one request in flight: the Exchange being filled, the body
// kept for retries, and the meter and recording of its answer.
type exchange struct {
	Exchange
	body   []byte
	meter  *meter
	record *recording
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// ServeHTTP checks the agent's credential and forwards its request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.enter() {
		http.Error(w, "acpflow gateway: closed", http.StatusServiceUnavailable)
		return
	}
	defer g.leave()
	x := &exchange{Exchange: Exchange{Started: time.Now(), Method: r.Method, Path: g.secrets.string(pathOf(r.URL))}}
	defer g.finish(x)
	if !g.credentialOK(r) {
		g.refuse(w, x, RefusedCredential, "acpflow gateway: this endpoint takes only the placeholder key acpflow gave the agent")
		return
	}
	if !g.underBase(r.URL.Path) {
		g.refuse(w, x, RefusedPath, "acpflow gateway: "+x.Path+" is not under the upstream's path "+g.upstream.Path)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		return // the agent went away while sending
	}
	if len(body) > maxRequestBody {
		g.refuse(w, x, RefusedTooLarge, "acpflow gateway: the request body is over 64 MiB")
		return
	}
	x.body = body
	plain := requestText(r.Header, body)
	x.Model = g.secrets.string(modelOf(r.URL.Path, plain))
	if g.cfg.Record {
		x.Request, x.RequestCut = g.recorded(plain)
		x.Truncated = x.RequestCut
	}
	r = r.WithContext(context.WithValue(r.Context(), exchangeKey{}, x))
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	g.proxy.ServeHTTP(w, r)
}

// enter counts a request in, unless the gateway is closing: Close waits
// for every request counted.
func (g *Gateway) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.handlers.Add(1)
	g.active++
	return true
}

// leave counts a request out, after its OnExchange.
func (g *Gateway) leave() {
	g.mu.Lock()
	g.active--
	g.mu.Unlock()
	g.handlers.Done()
}

// Settle waits, up to limit, until no request is in flight, and reports
// whether none is: a step whose turn ended reads its usage after the
// last answer's OnExchange, which may run just after the agent read it.
func (g *Gateway) Settle(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		g.mu.Lock()
		n := g.active
		g.mu.Unlock()
		if n == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// requestText is the request body decompressed (codex may gzip its
// requests), for reading the model and for the record; the body is
// forwarded as it came.
func requestText(h http.Header, body []byte) []byte {
	if !strings.EqualFold(h.Get("Content-Encoding"), "gzip") {
		return body
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return body
	}
	plain, err := io.ReadAll(io.LimitReader(zr, maxRequestBody))
	if err != nil {
		return body
	}
	return plain
}

// credentialOK reports whether every credential the request carries is
// the placeholder, and it carries one.
func (g *Gateway) credentialOK(r *http.Request) bool {
	want := []byte(g.cfg.Placeholder)
	found, ok := false, true
	check := func(v string) {
		found = true
		ok = ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(v)), want) == 1
	}
	for _, h := range credentialHeaders {
		for _, v := range r.Header.Values(h) {
			if h == "Authorization" && len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
				v = v[7:]
			}
			check(v)
		}
	}
	for _, v := range r.URL.Query()["key"] {
		check(v)
	}
	return found && ok
}

// underBase reports whether path is beneath the upstream's base path.
func (g *Gateway) underBase(path string) bool {
	base := g.upstream.Path
	return base == "" || path == base || strings.HasPrefix(path, base+"/")
}

// pathOf is a request's path and query without its key= parameter.
func pathOf(u *url.URL) string {
	p := u.EscapedPath()
	if q := dropKey(u.RawQuery); q != "" {
		p += "?" + q
	}
	return p
}

// dropKey removes the key= parameters from a raw query and leaves the
// rest as it was written (order and encoding).
func dropKey(raw string) string {
	if raw == "" {
		return ""
	}
	var kept []string
	for _, part := range strings.Split(raw, "&") {
		name, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil && n == "key" {
			continue
		}
		kept = append(kept, part)
	}
	return strings.Join(kept, "&")
}

// rewrite aims the outgoing request at the upstream with the real key.
// The proxy has already dropped the hop-by-hop headers; every other
// header goes as the agent sent it, but for its credentials and
// Accept-Encoding.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	out := pr.Out
	out.URL.Scheme, out.URL.Host = g.upstream.Scheme, g.upstream.Host
	out.URL.RawQuery = dropKey(out.URL.RawQuery)
	out.Host = ""
	for _, h := range credentialHeaders {
		out.Header.Del(h)
	}
	g.provider.setKey(out.Header, g.cfg.Key)
	// An answer the meter can read as it streams: compression would hide
	// a stream's usage until its end, and Node clients offer encodings
	// the standard library cannot decode (br, zstd).
	out.Header.Set("Accept-Encoding", "identity")
}

// retrier is the proxy's transport: it asks Allow before each attempt
// and retries what the provider asks to be retried.
type retrier struct{ g *Gateway }

func (t *retrier) RoundTrip(req *http.Request) (*http.Response, error) {
	g, x := t.g, exchangeOf(req.Context())
	for attempt := 1; ; attempt++ {
		if err := g.allow(); err != nil {
			return g.refusalResponse(req, x, RefusedBudget, budgetMessage(err)), nil
		}
		x.Attempts = attempt
		out := req
		if attempt > 1 {
			out = req.Clone(req.Context())
			out.Body = io.NopCloser(bytes.NewReader(x.body))
		}
		resp, err := g.trans.RoundTrip(out)
		if err != nil {
			return nil, err
		}
		wait, again := g.retryWait(resp, attempt)
		if !again {
			return resp, nil
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		timer := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, req.Context().Err()
		case <-timer.C:
		}
	}
}

// allow asks Config.Allow.
func (g *Gateway) allow() error {
	if g.cfg.Allow == nil {
		return nil
	}
	return g.cfg.Allow()
}

// budgetMessage is what the agent is told when Allow refuses: the
// budget's own words, and that acpflow, not the provider, refused.
func budgetMessage(err error) string {
	return "acpflow: the budget for model requests was reached (" + err.Error() + "); no more requests are forwarded"
}

// meterResponse tees the answer's body to a meter (and the record) as
// the proxy copies it to the agent.
func (g *Gateway) meterResponse(resp *http.Response) error {
	x := exchangeOf(resp.Request.Context())
	x.Status, x.ContentType = resp.StatusCode, resp.Header.Get("Content-Type")
	if x.Refusal != nil || resp.StatusCode == http.StatusSwitchingProtocols {
		// A protocol switch (a WebSocket) is passed through unmetered: the
		// proxy needs its body as it came, and no provider answers a model
		// request that way today.
		return nil
	}
	x.meter = &meter{
		provider: g.provider,
		status:   resp.StatusCode,
		sse:      strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream"),
		gzip:     strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip"),
	}
	if g.cfg.Record {
		x.record = &recording{limit: g.cfg.RecordLimit + maxSecret(g.cfg)}
	}
	resp.Body = &teeBody{ReadCloser: resp.Body, x: x}
	return nil
}

func maxSecret(c Config) int { return max(len(c.Key), len(c.Placeholder)) }

// teeBody hands each piece of the answer to the meter as the proxy reads
// it, and notes when the first one came.
type teeBody struct {
	io.ReadCloser
	x *exchange
}

func (t *teeBody) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		if t.x.FirstByte == 0 {
			t.x.FirstByte = max(time.Since(t.x.Started), 1)
		}
		t.x.meter.Write(p[:n])
		if t.x.record != nil {
			t.x.record.Write(p[:n])
		}
	}
	return n, err
}

// upstreamFailed answers when no answer came: the provider could not be
// reached (a provider-shaped 502), or the agent went away (nothing).
func (g *Gateway) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	x := exchangeOf(r.Context())
	if r.Context().Err() != nil || errors.Is(err, context.Canceled) {
		x.Status = 0
		return
	}
	g.refuse(w, x, RefusedUpstream, "acpflow gateway: the provider could not be reached: "+err.Error())
}

// refuse writes the gateway's own answer in the provider's shape.
func (g *Gateway) refuse(w http.ResponseWriter, x *exchange, kind, msg string) {
	status, body := g.refusal(x, kind, msg)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	// The providers' SDKs (Anthropic's, OpenAI's) read this and do not
	// retry: a refusal will not change on retry.
	h.Set("X-Should-Retry", "false")
	w.WriteHeader(status)
	w.Write(body)
}

// refusalResponse is a refusal as a response, for the proxy to deliver.
func (g *Gateway) refusalResponse(req *http.Request, x *exchange, kind, msg string) *http.Response {
	status, body := g.refusal(x, kind, msg)
	h := http.Header{"Content-Type": {"application/json"}, "X-Should-Retry": {"false"}}
	return &http.Response{
		Status: http.StatusText(status), StatusCode: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

// refusal notes a refusal in the exchange and returns its status and body.
func (g *Gateway) refusal(x *exchange, kind, msg string) (int, []byte) {
	msg = g.secrets.message(msg)
	status := refusalStatus[kind]
	x.Refusal, x.Status, x.ContentType = &Refusal{Kind: kind, Message: msg}, status, "application/json"
	body := g.provider.refusal(refusal{kind: kind, status: status, message: msg})
	if g.cfg.Record {
		x.Response = body
	}
	return status, body
}

// finish reads what the meter saw, adds it to the totals and reports the
// exchange.
func (g *Gateway) finish(x *exchange) {
	x.Duration = time.Since(x.Started)
	if m := x.meter; m != nil {
		m.finish()
		if x.Model == "" {
			x.Model = g.secrets.string(m.model)
		}
		if m.found {
			x.Usage, x.Metered = g.provider.normalise(&m.usage), true
			if pr, ok := g.prices.Of(x.Model); ok {
				c := pr.cost(x.Usage)
				x.Usage.Cost = &c
			}
			g.add(x.Model, x.Usage)
		}
		x.Error = m.err
		if x.Error == nil && x.Status >= 400 {
			x.Error = &ProviderError{Status: x.Status, Type: statusType(x.Status)}
		}
		if x.Error != nil {
			x.Error.Message = g.secrets.message(x.Error.Message)
		}
	}
	if x.record != nil {
		var cut bool
		x.Response, cut = g.recorded(x.record.buf)
		x.ResponseCut = cut || x.record.over
		x.Truncated = x.Truncated || x.ResponseCut
	}
	if g.cfg.OnExchange != nil {
		g.cfg.OnExchange(x.Exchange)
	}
}

// recorded is a body as kept in an Exchange: scrubbed first, then cut at
// the limit (so that no cut leaves part of a key), in a fresh slice.
func (g *Gateway) recorded(b []byte) ([]byte, bool) {
	b = g.secrets.bytes(bytes.Clone(b))
	if len(b) > g.cfg.RecordLimit {
		return b[:g.cfg.RecordLimit], true
	}
	return b, false
}

// recording keeps the first bytes of an answer, a little past the record
// limit so that a key across the limit is still found and scrubbed.
type recording struct {
	limit int
	buf   []byte
	over  bool
}

func (r *recording) Write(p []byte) {
	room := r.limit - len(r.buf)
	if len(p) > room {
		p, r.over = p[:max(room, 0)], true
	}
	r.buf = append(r.buf, p...)
}

// retryWait says whether to retry an answer, and after how long: a 429,
// 503, 529 or an overloaded error, while attempts remain, unless it is an
// exhausted quota (which a wait does not refill) or asks for a wait over
// MaxWait.
func (g *Gateway) retryWait(resp *http.Response, attempt int) (time.Duration, bool) {
	rt := g.cfg.Retry
	if attempt >= rt.Attempts || resp.StatusCode < 400 {
		return 0, false
	}
	peek, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(peek), resp.Body), resp.Body}
	m := &meter{status: resp.StatusCode}
	m.object(peek)
	kind := ""
	if m.err != nil {
		kind = strings.ToLower(m.err.Type + " " + m.err.Code)
	}
	switch {
	case strings.Contains(kind, "insufficient_quota"):
		return 0, false
	case resp.StatusCode == 429, resp.StatusCode == 503, resp.StatusCode == 529, strings.Contains(kind, "overloaded"):
	default:
		return 0, false
	}
	wait, maxWait := rt.Wait, rt.MaxWait
	if wait == 0 {
		wait = time.Second
	}
	if maxWait == 0 {
		maxWait = 30 * time.Second
	}
	if asked, ok := retryAfter(resp.Header, time.Now()); ok {
		return asked, asked <= maxWait
	}
	for range attempt - 1 {
		if wait >= maxWait {
			break
		}
		wait *= 2
	}
	return min(wait, maxWait), true
}

// retryAfter is the wait an answer asks for: OpenAI's retry-after-ms, or
// Retry-After in seconds or as a date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 && s < 1e9 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// copyBuffers are the proxy's copy buffers, shared by its streams: 16
// KiB, a TLS record's most (a read from the provider returns no more),
// and half what the proxy would take per stream on its own.
var copyBuffers = &bufferPool{pool: sync.Pool{New: func() any { return make([]byte, 16<<10) }}}

type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte  { return p.pool.Get().([]byte) }
func (p *bufferPool) Put(b []byte) { p.pool.Put(b) }
