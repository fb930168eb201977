package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The provider key of every test: it must reach the provider and nothing
// else.
const testKey = "sk-test-REALKEY-0123456789abcdef"

// provider is a TLS server standing for the model provider: it logs what
// it receives and answers with the test's handler.
type fakeProvider struct {
	*httptest.Server
	mu  sync.Mutex
	got []received
}

type received struct {
	Path   string // path and query
	Header http.Header
	Body   []byte
}

func newProvider(t *testing.T, answer http.HandlerFunc) *fakeProvider {
	t.Helper()
	p := &fakeProvider{}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		p.got = append(p.got, received{Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body})
		p.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		answer(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *fakeProvider) requests() []received {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]received(nil), p.got...)
}

// exchanges collects what OnExchange reports.
type exchanges struct {
	mu  sync.Mutex
	all []Exchange
}

func (e *exchanges) add(x Exchange) {
	e.mu.Lock()
	e.all = append(e.all, x)
	e.mu.Unlock()
}

func (e *exchanges) list() []Exchange {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Exchange(nil), e.all...)
}

// wait returns the exchanges once there are n: an exchange is reported
// just after its answer's last byte, which the agent may read first.
func (e *exchanges) wait(t *testing.T, n int) []Exchange {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if x := e.list(); len(x) >= n {
			return x
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d exchanges reported, want %d", len(e.list()), n)
		}
	}
}

// startGateway starts a gateway in front of p with cfg's other fields as
// the test set them; it is closed at the test's end.
func startGateway(t *testing.T, p *fakeProvider, cfg Config) (*Gateway, *exchanges) {
	t.Helper()
	if cfg.Provider == "" {
		cfg.Provider = "anthropic"
	}
	if cfg.Upstream == "" {
		cfg.Upstream = p.URL
	}
	cfg.Key = testKey
	if cfg.Placeholder == "" {
		cfg.Placeholder = NewPlaceholder()
	}
	cfg.Client = p.Client()
	ex := &exchanges{}
	cfg.OnExchange = ex.add
	g, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, ex
}

// agentCall is a request as an agent's client sends it.
type agentCall struct {
	path   string // appended to the gateway's URL
	header map[string]string
	body   string
}

// call sends c to base and returns the status, header and whole body.
func call(t *testing.T, base string, c agentCall) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", base+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

// agentOf is how each provider's agents send their key and their model
// request.
func agentOf(provider, placeholder string) agentCall {
	switch provider {
	case "openai":
		return agentCall{path: "/chat/completions", header: map[string]string{"Authorization": "Bearer " + placeholder},
			body: `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`}
	case "gemini":
		return agentCall{path: "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", header: map[string]string{"X-Goog-Api-Key": placeholder},
			body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`}
	}
	return agentCall{path: "/v1/messages", header: map[string]string{"X-Api-Key": placeholder, "Anthropic-Version": "2023-06-01"},
		body: `{"model":"claude-sonnet-4-5","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`}
}

// keyHeader is where each provider expects its key.
var keyHeader = map[string]struct{ name, value string }{
	"anthropic": {"X-Api-Key", testKey},
	"openai":    {"Authorization", "Bearer " + testKey},
	"gemini":    {"X-Goog-Api-Key", testKey},
}

func TestTheProviderGetsTheKeyAndTheAgentOnlyThePlaceholder(t *testing.T) {
	for _, provider := range []string{"anthropic", "openai", "gemini"} {
		t.Run(provider, func(t *testing.T) {
			p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"ok":true}`)
			})
			upstream := p.URL
			if provider == "openai" {
				upstream += "/v1"
			}
			g, _ := startGateway(t, p, Config{Provider: provider, Upstream: upstream})
			placeholder := g.cfg.Placeholder
			c := agentOf(provider, placeholder)
			c.header["X-Custom"] = "kept"
			c.header["Proxy-Authorization"] = "Basic aG9wOmhvcA=="
			c.header["Connection"] = "X-Hop"
			c.header["X-Hop"] = "named by Connection"
			status, header, body := call(t, g.URL(), c)
			if status != 200 || string(body) != `{"ok":true}` {
				t.Fatalf("agent got %d %s", status, body)
			}
			got := p.requests()
			if len(got) != 1 {
				t.Fatalf("provider got %d requests", len(got))
			}
			want := keyHeader[provider]
			if v := got[0].Header.Get(want.name); v != want.value {
				t.Errorf("provider's %s = %q, want the key", want.name, v)
			}
			if got[0].Header.Get("X-Custom") != "kept" || got[0].Header.Get("Content-Type") != "application/json" {
				t.Errorf("other headers not passed: %v", got[0].Header)
			}
			for _, hop := range []string{"Proxy-Authorization", "X-Hop"} {
				if v := got[0].Header.Get(hop); v != "" {
					t.Errorf("hop-by-hop header %s passed: %q", hop, v)
				}
			}
			dump, _ := json.Marshal(got[0])
			if strings.Contains(string(dump), placeholder) {
				t.Errorf("the placeholder reached the provider: %s", dump)
			}
			if strings.Count(string(dump), testKey) != 1 {
				t.Errorf("the key should be in exactly one header: %s", dump)
			}
			if string(got[0].Body) != c.body {
				t.Errorf("body changed: %s", got[0].Body)
			}
			for k, v := range header {
				if strings.Contains(strings.Join(v, ","), testKey) {
					t.Errorf("the agent got the key in %s", k)
				}
			}
			wantPath := strings.TrimPrefix(upstream, p.URL) + c.path
			if got[0].Path != wantPath {
				t.Errorf("provider got path %q, want %q", got[0].Path, wantPath)
			}
		})
	}
}

func TestAGeminiKeyInTheQueryIsReplacedByTheHeader(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
	g, ex := startGateway(t, p, Config{Provider: "gemini"})
	status, _, _ := call(t, g.URL(), agentCall{path: "/v1beta/models/gemini-2.5-flash:generateContent?alt=json&key=" + g.cfg.Placeholder + "&x=1", body: "{}"})
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	got := p.requests()[0]
	if got.Path != "/v1beta/models/gemini-2.5-flash:generateContent?alt=json&x=1" || got.Header.Get("X-Goog-Api-Key") != testKey {
		t.Errorf("provider got %s with key header %q", got.Path, got.Header.Get("X-Goog-Api-Key"))
	}
	if x := ex.wait(t, 1)[0]; strings.Contains(x.Path, "key=") || x.Model != "gemini-2.5-flash" {
		t.Errorf("exchange %+v", x)
	}
}

func TestARequestWithoutThePlaceholderIsRefused(t *testing.T) {
	cases := []struct {
		name   string
		header map[string]string
		query  string
	}{
		{"another key", map[string]string{"X-Api-Key": "sk-someone-else-000000000000"}, ""},
		{"no key at all", map[string]string{}, ""},
		{"the placeholder and another key", map[string]string{"X-Api-Key": "PLACEHOLDER", "Authorization": "Bearer sk-other"}, ""},
		{"another key in the query", map[string]string{"X-Api-Key": "PLACEHOLDER"}, "?key=other"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {})
			g, ex := startGateway(t, p, Config{})
			for k, v := range c.header {
				c.header[k] = strings.Replace(v, "PLACEHOLDER", g.cfg.Placeholder, 1)
			}
			status, header, body := call(t, g.URL(), agentCall{path: "/v1/messages" + c.query, header: c.header, body: "{}"})
			var shape struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			json.Unmarshal(body, &shape)
			if status != 401 || shape.Type != "error" || shape.Error.Type != "authentication_error" || header.Get("X-Should-Retry") != "false" {
				t.Errorf("got %d %s", status, body)
			}
			if n := len(p.requests()); n != 0 {
				t.Errorf("the provider got %d requests", n)
			}
			if x := ex.wait(t, 1); len(x) != 1 || x[0].Refusal == nil || x[0].Refusal.Kind != RefusedCredential || x[0].Attempts != 0 {
				t.Errorf("exchanges %+v", x)
			}
		})
	}
}

func TestAnswersArriveUnchanged(t *testing.T) {
	// Bytes a re-encoding would change: odd spacing, escapes, CRLF lines,
	// a comment line, and an event split across writes.
	sse := []string{
		"event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\r\n\r\n",
		": keep-alive\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",  \"delta\":{\"text\":\"h\\u00e9llo\"}}\n",
		"\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\n",
	}
	jsonBody := "{ \"type\" : \"message\", \"model\":\"claude-sonnet-4-5\",\"content\":[{\"text\":\"\\u00e9\"}],\"usage\":{\"input_tokens\":3,\"output_tokens\":4} }\n"
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.RawQuery, "json") {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, jsonBody)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range sse {
			io.WriteString(w, part)
			w.(http.Flusher).Flush()
		}
	})
	g, ex := startGateway(t, p, Config{})
	c := agentOf("anthropic", g.cfg.Placeholder)
	_, _, streamed := call(t, g.URL(), c)
	c.path += "?json"
	_, _, whole := call(t, g.URL(), c)
	if string(streamed) != strings.Join(sse, "") {
		t.Errorf("stream changed:\n%q\nwant\n%q", streamed, strings.Join(sse, ""))
	}
	if string(whole) != jsonBody {
		t.Errorf("body changed: %q", whole)
	}
	x := ex.wait(t, 2)
	if x[0].Path == c.path { // the stream's exchange may be reported second
		x[0], x[1] = x[1], x[0]
	}
	if x[0].Usage.Input != 12 || x[0].Usage.Output != 7 || x[1].Usage.Input != 3 || x[1].Usage.Output != 4 {
		t.Errorf("usage %+v", x)
	}
}

func TestAStreamIsNotBuffered(t *testing.T) {
	release := make(chan struct{})
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"first\":1}\n\n")
		w.(http.Flusher).Flush()
		select { // the rest only once the agent has the first event
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: {\"second\":2}\n\n")
	})
	g, ex := startGateway(t, p, Config{Provider: "openai"})
	c := agentOf("openai", g.cfg.Placeholder)
	req, _ := http.NewRequest("POST", g.URL()+c.path, strings.NewReader(c.body))
	req.Header.Set("Authorization", c.header["Authorization"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len("data: {\"first\":1}\n\n"))
	done := make(chan error, 1)
	go func() { _, err := io.ReadFull(resp.Body, first); done <- err }()
	select {
	case err := <-done:
		if err != nil || string(first) != "data: {\"first\":1}\n\n" {
			t.Fatalf("first event %q %v", first, err)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the first event did not arrive before the stream ended: the gateway buffers")
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "data: {\"second\":2}\n\n" {
		t.Errorf("rest %q", rest)
	}
	resp.Body.Close()
	g.Close()
	if x := ex.wait(t, 1); len(x) != 1 || x[0].FirstByte <= 0 || x[0].FirstByte > x[0].Duration {
		t.Errorf("exchange times %+v", x)
	}
}

func TestABudgetSpentStopsForwardingWithTheProvidersQuotaError(t *testing.T) {
	for _, provider := range []string{"anthropic", "openai", "gemini"} {
		t.Run(provider, func(t *testing.T) {
			p := newProvider(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
			var spent atomic.Bool
			g, ex := startGateway(t, p, Config{Provider: provider, Allow: func() error {
				if spent.Load() {
					return errString("run budget $1.00 reached")
				}
				return nil
			}})
			c := agentOf(provider, g.cfg.Placeholder)
			if status, _, _ := call(t, g.URL(), c); status != 200 {
				t.Fatalf("first request %d", status)
			}
			spent.Store(true)
			status, header, body := call(t, g.URL(), c)
			if n := len(p.requests()); n != 1 {
				t.Errorf("provider got %d requests, want 1", n)
			}
			if status != 429 || header.Get("X-Should-Retry") != "false" || header.Get("Content-Type") != "application/json" {
				t.Errorf("refusal %d %v", status, header)
			}
			if msg := refusalMessage(t, provider, body); !strings.Contains(msg, "acpflow") || !strings.Contains(msg, "budget") || !strings.Contains(msg, "run budget $1.00 reached") {
				t.Errorf("refusal message %q", msg)
			}
			x := ex.wait(t, 2)
			if len(x) != 2 || x[1].Refusal == nil || x[1].Refusal.Kind != RefusedBudget || x[1].Status != 429 || x[1].Attempts != 0 || x[1].Error != nil {
				t.Errorf("exchange %+v", x[1])
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// refusalMessage reads a refusal in the provider's own error shape,
// failing the test when the shape is not the provider's.
func refusalMessage(t *testing.T, provider string, body []byte) string {
	t.Helper()
	var v struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Code    any    `json:"code"`
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("refusal is not JSON: %s", body)
	}
	ok := false
	switch provider {
	case "anthropic":
		ok = v.Type == "error" && v.Error.Type == "rate_limit_error"
	case "openai":
		ok = v.Error.Type == "insufficient_quota" && v.Error.Code == "insufficient_quota"
	case "gemini":
		ok = v.Error.Status == "RESOURCE_EXHAUSTED" && v.Error.Code == float64(429)
	}
	if !ok {
		t.Errorf("%s refusal not in its shape: %s", provider, body)
	}
	return v.Error.Message
}

func TestProviderErrorsAreTyped(t *testing.T) {
	cases := []struct {
		name, provider, body string
		status               int
		want                 ProviderError
	}{
		{"anthropic 429", "anthropic", `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`, 429,
			ProviderError{Status: 429, Type: "rate_limit_error", Message: "Number of request tokens has exceeded your per-minute rate limit"}},
		{"anthropic 529", "anthropic", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 529,
			ProviderError{Status: 529, Type: "overloaded_error", Message: "Overloaded"}},
		{"openai 401", "openai", `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, 401,
			ProviderError{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided."}},
		{"openai quota", "openai", `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`, 429,
			ProviderError{Status: 429, Type: "insufficient_quota", Code: "insufficient_quota", Message: "You exceeded your current quota"}},
		{"gemini 429", "gemini", `{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}`, 429,
			ProviderError{Status: 429, Type: "RESOURCE_EXHAUSTED", Message: "Resource has been exhausted"}},
		{"gemini 403 in a list", "gemini", `[{"error":{"code":403,"message":"Permission denied","status":"PERMISSION_DENIED"}}]`, 403,
			ProviderError{Status: 403, Type: "PERMISSION_DENIED", Message: "Permission denied"}},
		{"a 502 without a body", "openai", ``, 502, ProviderError{Status: 502, Type: "bad_gateway"}},
		{"an error event in a stream", "anthropic", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", 200,
			ProviderError{Status: 200, Type: "overloaded_error", Message: "Overloaded"}},
		{"a failed response", "openai", "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n", 200,
			ProviderError{Status: 200, Type: "server_error", Code: "server_error", Message: "boom"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
				if c.status == 200 {
					w.Header().Set("Content-Type", "text/event-stream")
				}
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			})
			g, ex := startGateway(t, p, Config{Provider: c.provider})
			status, _, body := call(t, g.URL(), agentOf(c.provider, g.cfg.Placeholder))
			if status != c.status || string(body) != c.body {
				t.Errorf("agent got %d %s", status, body)
			}
			x := ex.wait(t, 1)[0]
			if x.Error == nil || *x.Error != c.want {
				t.Errorf("error %+v, want %+v", x.Error, c.want)
			}
		})
	}
}

func TestRetriesAreBounded(t *testing.T) {
	cases := []struct {
		name         string
		answers      []int // statuses the provider answers in turn (the last repeats)
		retryAfter   string
		body         string
		attempts     int
		wantRequests int
		wantStatus   int
	}{
		{"overloaded every time", []int{529}, "0", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, 3, 3, 529},
		{"a 429 then an answer", []int{429, 200}, "0", `{}`, 3, 2, 200},
		{"a wait over the cap", []int{429}, "3600", `{}`, 3, 1, 429},
		{"a spent quota", []int{429}, "0", `{"error":{"type":"insufficient_quota","code":"insufficient_quota","message":"quota"}}`, 3, 1, 429},
		{"not a retryable status", []int{500}, "0", `{}`, 3, 1, 500},
		{"no retry configured", []int{429}, "0", `{}`, 0, 1, 429},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				status := c.answers[min(n, len(c.answers)-1)]
				n++
				mu.Unlock()
				w.Header().Set("Retry-After", c.retryAfter)
				w.WriteHeader(status)
				io.WriteString(w, c.body)
			})
			g, ex := startGateway(t, p, Config{Retry: Retry{Attempts: c.attempts, Wait: time.Millisecond, MaxWait: time.Minute}})
			ag := agentOf("anthropic", g.cfg.Placeholder)
			status, _, body := call(t, g.URL(), ag)
			if status != c.wantStatus || string(body) != c.body {
				t.Errorf("agent got %d %s", status, body)
			}
			got := p.requests()
			if len(got) != c.wantRequests {
				t.Errorf("provider got %d requests, want %d", len(got), c.wantRequests)
			}
			for _, r := range got {
				if string(r.Body) != ag.body || r.Header.Get("X-Api-Key") != testKey {
					t.Errorf("a retry differs: %s %v", r.Body, r.Header)
				}
			}
			if x := ex.wait(t, 1); len(x) != 1 || x[0].Attempts != c.wantRequests {
				t.Errorf("exchanges %+v", x)
			}
		})
	}
}

func TestABudgetSpentDuringRetriesStopsThem(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(529) })
	calls := 0
	g, ex := startGateway(t, p, Config{Retry: Retry{Attempts: 5, Wait: time.Millisecond}, Allow: func() error {
		calls++
		if calls > 2 {
			return errString("spent")
		}
		return nil
	}})
	status, _, _ := call(t, g.URL(), agentOf("anthropic", g.cfg.Placeholder))
	if status != 429 || len(p.requests()) != 2 {
		t.Errorf("status %d after %d requests", status, len(p.requests()))
	}
	if x := ex.wait(t, 1)[0]; x.Refusal == nil || x.Refusal.Kind != RefusedBudget || x.Attempts != 2 {
		t.Errorf("exchange %+v", x)
	}
}

func TestNoKeyInAnyExchangeOrError(t *testing.T) {
	// A provider that echoes what it got, the key included, in its
	// answer and in its error message.
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		k := r.Header.Get("X-Api-Key")
		io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"bad key `+k+`"},"echo":"`+k+`"}`)
	})
	g, ex := startGateway(t, p, Config{Record: true})
	ag := agentOf("anthropic", g.cfg.Placeholder)
	ag.body = `{"model":"claude-sonnet-4-5","note":"` + g.cfg.Placeholder + `"}`
	call(t, g.URL(), ag)
	call(t, g.URL(), agentCall{path: "/v1/messages?key=" + testKey, header: map[string]string{"X-Api-Key": testKey}, body: "{}"})
	x := ex.wait(t, 2)
	if len(x) != 2 || x[0].Error == nil || !strings.Contains(x[0].Error.Message, redacted) || len(x[0].Response) == 0 || len(x[0].Request) == 0 {
		t.Fatalf("exchanges %+v", x)
	}
	dump, _ := json.Marshal(x)
	for _, secret := range []string{testKey, g.cfg.Placeholder} {
		if strings.Contains(string(dump), secret) {
			t.Errorf("a secret in the exchanges: %s", dump)
		}
	}

	_, err := Start(Config{Provider: "anthropic", Upstream: "http://example.com/" + testKey, Key: testKey, Placeholder: NewPlaceholder()})
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Errorf("Start's error %v", err)
	}
}

func TestARecordedBodyIsBoundedAndCutAfterScrubbing(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 95)+testKey+strings.Repeat("y", 1000))
	})
	g, ex := startGateway(t, p, Config{Record: true, RecordLimit: 100})
	call(t, g.URL(), agentOf("anthropic", g.cfg.Placeholder))
	x := ex.wait(t, 1)[0]
	if len(x.Response) != 100 || !x.Truncated || strings.Contains(string(x.Response), testKey[:5]) {
		t.Errorf("recorded %q truncated=%v", x.Response, x.Truncated)
	}
}

func TestTheUpstreamBasePathIsTheGatewaysPath(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
	g, ex := startGateway(t, p, Config{Provider: "openai", Upstream: p.URL + "/openai/v1/"})
	if !strings.HasSuffix(g.URL(), "/openai/v1") {
		t.Fatalf("URL %s", g.URL())
	}
	ag := agentOf("openai", g.cfg.Placeholder)
	ag.path = "/responses"
	if status, _, _ := call(t, g.URL(), ag); status != 200 || p.requests()[0].Path != "/openai/v1/responses" {
		t.Errorf("status %d, provider got %v", status, p.requests())
	}
	base := strings.TrimSuffix(g.URL(), "/openai/v1")
	ag.path = "/v1/responses"
	status, _, body := call(t, base, ag)
	if status != 404 || len(p.requests()) != 1 || ex.wait(t, 2)[1].Refusal.Kind != RefusedPath {
		t.Errorf("outside the base path: %d %s", status, body)
	}
}

func TestAnUnreachableProviderIsAProviderShapedError(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {})
	g, ex := startGateway(t, p, Config{Provider: "gemini"})
	p.Close()
	status, _, body := call(t, g.URL(), agentOf("gemini", g.cfg.Placeholder))
	var v struct {
		Error struct {
			Code            int
			Status, Message string
		}
	}
	json.Unmarshal(body, &v)
	if status != 502 || v.Error.Status != "UNAVAILABLE" || !strings.Contains(v.Error.Message, "could not be reached") {
		t.Errorf("got %d %s", status, body)
	}
	if x := ex.wait(t, 1)[0]; x.Refusal == nil || x.Refusal.Kind != RefusedUpstream {
		t.Errorf("exchange %+v", x)
	}
}

func TestStartRefusesABadConfig(t *testing.T) {
	good := Config{Provider: "openai", Upstream: "https://api.openai.com/v1", Key: testKey, Placeholder: NewPlaceholder()}
	cases := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"an unknown provider", func(c *Config) { c.Provider = "mistral" }, "not one of"},
		{"plain http to another host", func(c *Config) { c.Upstream = "http://api.openai.com/v1" }, "loopback"},
		{"no key", func(c *Config) { c.Key = "" }, "no provider key"},
		{"a key with a newline", func(c *Config) { c.Key = testKey + "\n" }, "control character"},
		{"a short placeholder", func(c *Config) { c.Placeholder = "x" }, "placeholder"},
		{"the key as placeholder", func(c *Config) { c.Placeholder = testKey }, "placeholder is the key"},
		{"a negative price", func(c *Config) { c.Prices = Prices{"m": {Input: -1}} }, "price"},
		{"a query in the upstream", func(c *Config) { c.Upstream += "?key=" + testKey }, "base URL only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := good
			c.change(&cfg)
			g, err := Start(cfg)
			if err == nil {
				g.Close()
				t.Fatal("started")
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q", err)
			}
		})
	}
}

func TestCloseWaitsForStreamsAndLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		release := make(chan struct{})
		p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {}\n\n")
			w.(http.Flusher).Flush()
			<-release
			io.WriteString(w, "data: {\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n")
		})
		g, ex := startGateway(t, p, Config{Provider: "openai"})
		ag := agentOf("openai", g.cfg.Placeholder)
		req, _ := http.NewRequest("POST", g.URL()+ag.path, strings.NewReader(ag.body))
		req.Header.Set("Authorization", ag.header["Authorization"])
		tr := &http.Transport{}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		closed := make(chan struct{})
		go func() { g.Close(); close(closed) }()
		select {
		case <-closed:
			t.Fatal("Close returned with a stream in flight")
		case <-time.After(100 * time.Millisecond):
		}
		close(release)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		<-closed
		if !strings.HasSuffix(string(body), "\"completion_tokens\":2}}\n\n") || len(ex.list()) != 1 || ex.list()[0].Usage.Output != 2 {
			t.Errorf("stream %q, exchanges %+v", body, ex.list())
		}
		tr.CloseIdleConnections()
		p.Close()
		p.Client().Transport.(*http.Transport).CloseIdleConnections()
	}()
	settles(t, before)
}

// settles waits for the number of goroutines to come down to at most n.
func settles(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := runtime.NumGoroutine()
		if got <= n {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, want at most %d:\n%s", got, n, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAStreamCutByTheProviderIsReportedWithWhatWasMetered(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // no end of the chunked body: the answer is cut
		}
	})
	g, ex := startGateway(t, p, Config{})
	ag := agentOf("anthropic", g.cfg.Placeholder)
	req, _ := http.NewRequest("POST", g.URL()+ag.path, strings.NewReader(ag.body))
	req.Header.Set("X-Api-Key", g.cfg.Placeholder)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || !strings.Contains(string(got), "message_start") {
		t.Errorf("the agent should see the stream cut after the first event: %q %v", got, err)
	}
	x := ex.wait(t, 1)[0]
	if !x.Metered || x.Usage.Input != 12 || x.Status != 200 {
		t.Errorf("exchange %+v", x)
	}
}

func TestCloseLeavesNoGoroutineOfItsOwnTransport(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") }))
		defer srv.Close()
		placeholder := NewPlaceholder()
		g, err := Start(Config{Provider: "openai", Upstream: srv.URL + "/v1", Key: testKey, Placeholder: placeholder})
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		for range 3 {
			req, _ := http.NewRequest("POST", g.URL()+"/chat/completions", strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+placeholder)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		g.Close()
	}()
	settles(t, before)
}

func TestAProviderErrorIsSortedByKind(t *testing.T) {
	cases := []struct {
		err  ProviderError
		want string
	}{
		{ProviderError{Status: 429, Type: "rate_limit_error"}, ErrorRateLimit},
		{ProviderError{Status: 429, Type: "insufficient_quota", Code: "insufficient_quota"}, ErrorQuota},
		{ProviderError{Status: 429, Type: "RESOURCE_EXHAUSTED", Message: "You exceeded your current quota"}, ErrorQuota},
		{ProviderError{Status: 429, Type: "RESOURCE_EXHAUSTED", Message: "Too many requests"}, ErrorRateLimit},
		{ProviderError{Status: 400, Type: "invalid_request_error", Message: "Your credit balance is too low to access the Anthropic API."}, ErrorQuota},
		{ProviderError{Status: 400, Type: "invalid_request_error", Message: "max_tokens: must be positive"}, ErrorRequest},
		{ProviderError{Status: 400, Type: "billing_error"}, ErrorQuota},
		{ProviderError{Status: 529, Type: "overloaded_error"}, ErrorOverloaded},
		{ProviderError{Status: 200, Type: "overloaded_error"}, ErrorOverloaded},
		{ProviderError{Status: 503, Type: "UNAVAILABLE"}, ErrorOverloaded},
		{ProviderError{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key"}, ErrorAuthentication},
		{ProviderError{Status: 403, Type: "PERMISSION_DENIED"}, ErrorPermission},
		{ProviderError{Status: 500, Type: "api_error"}, ErrorServer},
		{ProviderError{Status: 200, Type: "server_error", Code: "server_error"}, ErrorServer},
		{ProviderError{Status: 404, Type: "not_found_error"}, ErrorRequest},
	}
	for _, c := range cases {
		if got := c.err.Kind(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.err, got, c.want)
		}
	}
}

func TestAProtocolSwitchIsPassedThroughUnmetered(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" || r.Header.Get("X-Api-Key") != testKey {
			w.WriteHeader(400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		brw.WriteString("echo " + line)
		brw.Flush()
	})
	g, ex := startGateway(t, p, Config{})
	req, _ := http.NewRequest("GET", g.URL()+"/v1/realtime", nil)
	req.Header.Set("X-Api-Key", g.cfg.Placeholder)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != 101 || !ok {
		t.Fatalf("status %d", resp.StatusCode)
	}
	io.WriteString(rw, "ping\n")
	got := make([]byte, len("echo ping\n"))
	if _, err := io.ReadFull(rw, got); err != nil || string(got) != "echo ping\n" {
		t.Errorf("through the switch: %q %v", got, err)
	}
	rw.Close()
	if x := ex.wait(t, 1)[0]; x.Status != 101 || x.Metered || x.Refusal != nil {
		t.Errorf("exchange %+v", x)
	}
}

// A listener made elsewhere (a sandbox's network namespace) serves the
// same gateway: the placeholder is checked, the key sent, the usage
// metered; Close closes it, and one handed over after Close is closed at
// once.
func TestAnExtraListenerServesTheSameGatewayUntilClose(t *testing.T) {
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"type":"message","model":"claude-sonnet-4-5","usage":{"input_tokens":7,"output_tokens":3}}`)
	})
	g, ex := startGateway(t, p, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.Serve(ln)
	if g.Port() == ln.Addr().(*net.TCPAddr).Port {
		t.Fatal("the extra listener took the gateway's own port")
	}
	base := "http://" + ln.Addr().String()
	c := agentOf("anthropic", g.cfg.Placeholder)
	c.body = `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[]}`
	if status, _, body := call(t, base, c); status != 200 {
		t.Fatalf("through the extra listener: %d %s", status, body)
	}
	c.header["X-Api-Key"] = "not-the-placeholder"
	if status, _, _ := call(t, base, c); status != 401 {
		t.Errorf("a request without the placeholder on the extra listener got %d, want 401", status)
	}
	ex.wait(t, 2)
	if got := p.requests(); len(got) != 1 || got[0].Header.Get("X-Api-Key") != testKey {
		t.Errorf("the provider got %d requests, want 1 with the key", len(got))
	}
	g.Close()
	if u := g.Usage()["claude-sonnet-4-5"]; u.Input != 7 || u.Output != 3 {
		t.Errorf("usage through the extra listener %+v, want 7 in, 3 out", u)
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Error("the extra listener still accepts after Close")
	}
	late, _ := net.Listen("tcp", "127.0.0.1:0")
	g.Serve(late)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c, err := net.DialTimeout("tcp", late.Addr().String(), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("a listener served after Close is still open")
		}
	}
}
