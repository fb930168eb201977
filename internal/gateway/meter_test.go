package gateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/acpflow/acpflow/internal/modelserver"
)

// The scripted model servers the real-agent tests use answer as the
// providers do; usage read through the gateway must be what they sent.
func TestUsageIsWhatTheProviderSent(t *testing.T) {
	sent := &modelserver.Usage{Input: 100, Output: 20, CacheRead: 30, CacheWrite: 5}
	srv, err := modelserver.Start(modelserver.Script{{Say: "hello there", Chunks: 3, Usage: sent}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	price := func(in, out, read, write float64) *float64 {
		c := (100*in + 20*out + 30*read + write) / 1e6
		return &c
	}
	cases := []struct {
		name, provider, upstream, path, body string
		want                                 Usage
	}{
		{"anthropic streamed", "anthropic", "", "/v1/messages",
			`{"model":"claude-sonnet-4-5-20250929","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"Bash"}]}`,
			Usage{Input: 100, Output: 20, CacheRead: 30, CacheWrite: 5, Cost: price(3, 15, 0.3, 5*3.75)}},
		{"anthropic whole", "anthropic", "", "/v1/messages",
			`{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"Bash"}]}`,
			Usage{Input: 100, Output: 20, CacheRead: 30, CacheWrite: 5, Cost: price(1, 5, 0.1, 5*1.25)}},
		{"openai responses streamed", "openai", "/v1", "/responses",
			`{"model":"gpt-5","stream":true,"input":[{"type":"message"}],"tools":[{"type":"function","name":"exec_command","parameters":{"properties":{"cmd":{"type":"string"}}}}]}`,
			Usage{Input: 100, Output: 20, CacheRead: 30, Cost: price(1.25, 10, 0.125, 0)}},
		{"openai chat streamed", "openai", "/v1", "/chat/completions",
			`{"model":"gpt-4o-2024-08-06","stream":true,"messages":[{"role":"user"}],"tools":[{"type":"function","function":{"name":"bash","parameters":{"properties":{"command":{"type":"string"}}}}}]}`,
			Usage{Input: 100, Output: 20, CacheRead: 30, Cost: price(2.5, 10, 1.25, 0)}},
		{"openai chat whole, a model without a price", "openai", "/v1", "/chat/completions",
			`{"model":"scripted-model","messages":[{"role":"user"}],"tools":[{"type":"function","function":{"name":"bash","parameters":{"properties":{"command":{"type":"string"}}}}}]}`,
			Usage{Input: 100, Output: 20, CacheRead: 30}},
		{"gemini streamed", "gemini", "", "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]}`,
			Usage{Input: 100, Output: 20, CacheRead: 30, Cost: price(1.25, 10, 0.125, 0)}},
		{"gemini whole", "gemini", "", "/v1beta/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]}`,
			Usage{Input: 100, Output: 20, CacheRead: 30, Cost: price(0.3, 2.5, 0.03, 0)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ex := &exchanges{}
			placeholder := NewPlaceholder()
			g, err := Start(Config{Provider: c.provider, Upstream: srv.URL() + c.upstream, Key: testKey,
				Placeholder: placeholder, OnExchange: ex.add})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			ag := agentOf(c.provider, placeholder)
			ag.path, ag.body = c.path, c.body
			status, _, body := call(t, g.URL(), ag)
			if status != 200 || !strings.Contains(string(body), "here") {
				t.Fatalf("agent got %d %s", status, body)
			}
			x := ex.wait(t, 1)[0]
			if !x.Metered || !sameUsage(x.Usage, c.want) {
				t.Errorf("metered %v %s, want %s", x.Metered, show(x.Usage), show(c.want))
			}
			if total := g.Usage()[x.Model]; !sameUsage(total, c.want) || x.Model == "" {
				t.Errorf("total for %q: %s", x.Model, show(total))
			}
		})
	}
}

func sameUsage(a, b Usage) bool {
	costA, costB := a.Cost, b.Cost
	a.Cost, b.Cost = nil, nil
	if a != b || (costA == nil) != (costB == nil) {
		return false
	}
	return costA == nil || abs(*costA-*costB) < 1e-9
}

func abs(x float64) float64 { return max(x, -x) }

func show(u Usage) string {
	b, _ := json.Marshal(u)
	if u.Cost != nil {
		return fmt.Sprintf("%s (cost %v)", b, *u.Cost)
	}
	return string(b)
}

// Each provider's stream read a byte at a time gives the usage it gives
// whole: the meter does not depend on where the network splits lines.
func TestTheMeterReadsUsageWhereverTheStreamIsSplit(t *testing.T) {
	cases := []struct {
		name, provider, stream string
		want                   Usage
	}{
		{"anthropic", "anthropic",
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-opus-4-5\",\"usage\":{\"input_tokens\":5,\"cache_creation_input_tokens\":7,\"cache_read_input_tokens\":9,\"cache_creation\":{\"ephemeral_5m_input_tokens\":4,\"ephemeral_1h_input_tokens\":3},\"output_tokens\":1}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"usage\"}}\n\n" +
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":42}}\n\n",
			Usage{Input: 5, Output: 42, CacheRead: 9, CacheWrite: 7, CacheWrite1h: 3}},
		{"gemini with thoughts, CRLF", "gemini",
			"data: {\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":50,\"candidatesTokenCount\":1}}\r\n\r\n" +
				"data: {\"candidates\":[],\"usageMetadata\":{\"promptTokenCount\":50,\"candidatesTokenCount\":10,\"cachedContentTokenCount\":20,\"thoughtsTokenCount\":4,\"toolUsePromptTokenCount\":3},\"modelVersion\":\"gemini-2.5-pro\"}\r\n\r\n",
			Usage{Input: 33, Output: 14, CacheRead: 20, Thoughts: 4}},
		{"openai chat, usage last, no final blank line", "openai",
			"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n" +
				"data: {\"choices\":[],\"model\":\"gpt-5\",\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":30,\"prompt_tokens_details\":{\"cached_tokens\":60},\"completion_tokens_details\":{\"reasoning_tokens\":12}}}\n\n" +
				"data: [DONE]",
			Usage{Input: 40, Output: 30, CacheRead: 60, Thoughts: 12}},
		{"openai responses", "openai",
			"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"model\":\"gpt-5\",\"usage\":{\"input_tokens\":80,\"input_tokens_details\":{\"cached_tokens\":16},\"output_tokens\":9,\"output_tokens_details\":{\"reasoning_tokens\":2}}}}\n\n",
			Usage{Input: 64, Output: 9, CacheRead: 16, Thoughts: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, step := range []int{1, 7, len(c.stream)} {
				m := &meter{provider: providers[c.provider], status: 200, sse: true}
				for s := c.stream; s != ""; {
					k := min(step, len(s))
					m.Write([]byte(s[:k]))
					s = s[k:]
				}
				m.finish()
				if got := m.provider.normalise(&m.usage); !m.found || got != c.want {
					t.Errorf("in pieces of %d: %s, want %s", step, show(got), show(c.want))
				}
			}
		})
	}
}

func TestPricesOf(t *testing.T) {
	p := DefaultPrices()
	cases := []struct {
		model string
		want  string // the table entry, "" for none
	}{
		{"claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"claude-opus-5-7", ""}, // a new model is not priced as an old one
		{"claude-opus-5-5-20260901", "claude-opus-5-5"},
		{"gpt-4o-2024-08-06", "gpt-4o"},
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini"},
		{"models/gemini-2.5-flash", "gemini-2.5-flash"},
		{"gemini-2.5-flash-lite", "gemini-2.5-flash-lite"},
		{"claude-sonnet-5-latest", "claude-sonnet-5"},
		{"claude-sonnet-5-5-20260901", "claude-sonnet-5-5"},
		{"claude-sonnet-5-7-20270101", ""},
		{"scripted-model", ""},
	}
	for _, c := range cases {
		got, ok := p.Of(c.model)
		if ok != (c.want != "") || (ok && got != p[c.want]) {
			t.Errorf("%s: %v %v, want the price of %q", c.model, got, ok, c.want)
		}
	}
	over, err := p.With(Prices{"claude-sonnet-4-5": {Input: 1}, "my-model": {Output: 2}})
	if err != nil || over["claude-sonnet-4-5"].Input != 1 || over["my-model"].Output != 2 || p["claude-sonnet-4-5"].Input != 3 {
		t.Errorf("With: %v %v", over, err)
	}
	if c := (Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}).cost(Usage{Input: 1e6, Output: 2e6, CacheRead: 1e6, CacheWrite: 1e6}); c != 37.05 {
		t.Errorf("cost %v", c)
	}
	// An hour's cache writes at their own price.
	if c := (Price{CacheWrite: 5, CacheWrite1h: 8}).cost(Usage{CacheWrite: 3e6, CacheWrite1h: 1e6}); c != 18 {
		t.Errorf("cost with hour writes %v", c)
	}
}
