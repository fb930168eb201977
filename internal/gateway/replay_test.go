package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// recordThrough records one answer of p as a gateway with Record keeps it.
func recordThrough(t *testing.T, p *fakeProvider, provider string) Exchange {
	t.Helper()
	g, ex := startGateway(t, p, Config{Provider: provider, Record: true})
	ag := agentOf(provider, g.cfg.Placeholder)
	call(t, g.URL(), ag)
	return ex.wait(t, 1)[0]
}

// replayGateway is a gateway whose upstream is a Replay of answers, as a
// replayed step's is: no key of the user's, the replay's address.
func replayGateway(t *testing.T, provider string, answers ...Answer) (*Gateway, *Replay, *exchanges) {
	t.Helper()
	r, err := StartReplay(provider, answers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	ex := &exchanges{}
	g, err := Start(Config{Provider: provider, Upstream: r.URL(), Key: "acpflow-replay-0123456789", Placeholder: NewPlaceholder(), OnExchange: ex.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g, r, ex
}

func answerOf(x Exchange) Answer {
	return Answer{Method: x.Method, Path: x.Path, Model: x.Model, Status: x.Status, ContentType: x.ContentType, Body: x.Response, Cut: x.ResponseCut}
}

func TestARecordedStreamIsReplayedByteForByteAndMeteredAlike(t *testing.T) {
	stream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"«é» \\n\"}}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\n"
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		io.WriteString(w, stream)
	})
	recorded := recordThrough(t, p, "anthropic")
	if string(recorded.Response) != stream || recorded.ContentType != "text/event-stream; charset=utf-8" {
		t.Fatalf("recorded %q (%s), want the stream as sent", recorded.Response, recorded.ContentType)
	}

	g, r, ex := replayGateway(t, "anthropic", answerOf(recorded))
	status, h, body := call(t, g.URL(), agentOf("anthropic", g.cfg.Placeholder))
	if status != 200 || string(body) != stream || h.Get("Content-Type") != recorded.ContentType {
		t.Errorf("replayed %d %q (%s), want the recorded stream", status, body, h.Get("Content-Type"))
	}
	if x := ex.wait(t, 1)[0]; x.Usage.Tokens() != recorded.Usage.Tokens() || x.Usage.Output != 7 || !x.Metered {
		t.Errorf("replay metered %+v, want the recording's %+v", x.Usage, recorded.Usage)
	}
	if r.Diverged() != nil || r.Requests() != 1 {
		t.Errorf("diverged %v after %d requests", r.Diverged(), r.Requests())
	}
	if n, _ := r.Left(); n != 0 {
		t.Errorf("%d answers left, want none", n)
	}
}

func TestARequestTheRecordingHasNoAnswerForIsTheProvidersErrorAndNamed(t *testing.T) {
	for _, provider := range []string{"anthropic", "openai", "gemini"} {
		t.Run(provider, func(t *testing.T) {
			one := Answer{Method: "POST", Path: agentOf(provider, "").path, Status: 200, ContentType: "application/json", Body: []byte(`{}`)}
			g, r, _ := replayGateway(t, provider, one)
			ag := agentOf(provider, g.cfg.Placeholder)
			if status, _, _ := call(t, g.URL(), ag); status != 200 {
				t.Fatalf("the recorded request got %d", status)
			}
			status, h, body := call(t, g.URL(), ag)
			if status != http.StatusBadRequest || h.Get("X-Should-Retry") != "false" {
				t.Errorf("the second request got %d (x-should-retry %q), want 400 not to be retried", status, h.Get("X-Should-Retry"))
			}
			var shape map[string]any
			if json.Unmarshal(body, &shape) != nil || shape["error"] == nil {
				t.Errorf("not the provider's error shape: %s", body)
			}
			want := "model request 2 (POST " + ag.path + ") has no recorded answer"
			if err := r.Diverged(); err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(string(body), want) {
				t.Errorf("diverged %v, body %s; want %q", err, body, want)
			}
		})
	}
}

func TestRequestsRacingForTwoModelsTakeTheirOwnAnswers(t *testing.T) {
	main := Answer{Method: "POST", Path: "/v1/messages", Model: "claude-sonnet-4-5", Status: 200, ContentType: "application/json", Body: []byte(`{"main":true}`)}
	title := Answer{Method: "POST", Path: "/v1/messages", Model: "claude-haiku-4-5", Status: 200, ContentType: "application/json", Body: []byte(`{"title":true}`)}
	g, r, _ := replayGateway(t, "anthropic", main, title)
	ag := agentOf("anthropic", g.cfg.Placeholder)
	ag.body = `{"model":"claude-haiku-4-5","max_tokens":10,"messages":[]}`
	if _, _, body := call(t, g.URL(), ag); string(body) != `{"title":true}` {
		t.Errorf("the haiku request got %s, want its own answer", body)
	}
	ag.body = `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[]}`
	if _, _, body := call(t, g.URL(), ag); string(body) != `{"main":true}` {
		t.Errorf("the sonnet request got %s, want its own answer", body)
	}
	if r.Diverged() != nil {
		t.Error(r.Diverged())
	}
}

func TestACutRecordingOrAnAbandonedRequestReplaysAsRecorded(t *testing.T) {
	cut := Answer{Method: "POST", Path: "/v1/messages", Status: 200, ContentType: "application/json", Body: []byte(`{"x`), Cut: true}
	g, r, _ := replayGateway(t, "anthropic", cut)
	if status, _, _ := call(t, g.URL(), agentOf("anthropic", g.cfg.Placeholder)); status != http.StatusBadRequest ||
		r.Diverged() == nil || !strings.Contains(r.Diverged().Error(), "cut at the record limit") {
		t.Errorf("a cut answer: %d, %v; want a divergence naming the cut", status, r.Diverged())
	}

	abandoned := Answer{Method: "POST", Path: "/v1/messages"}
	g, _, _ = replayGateway(t, "anthropic", abandoned)
	ag := agentOf("anthropic", g.cfg.Placeholder)
	req, _ := http.NewRequest("POST", g.URL()+ag.path, strings.NewReader(ag.body))
	req.Header.Set("X-Api-Key", g.cfg.Placeholder)
	client := &http.Client{Timeout: 200 * time.Millisecond}
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("a request abandoned in the recording got %d, want no answer until the agent gives up", resp.StatusCode)
	}
}

func TestTwoRequestsForOneModelTakeTheAnswerOfTheirShape(t *testing.T) {
	// Recorded: the turn (tools offered) first, then a title (none).
	turn := Answer{Method: "POST", Path: "/v1/messages", Model: "m", Status: 200, Body: []byte(`{"turn":true}`),
		Request: []byte(`{"model":"m","messages":[{"role":"user","content":"at 10:02"}],"tools":[{"name":"Bash"}],"stream":true}`)}
	title := Answer{Method: "POST", Path: "/v1/messages", Model: "m", Status: 200, Body: []byte(`{"title":true}`),
		Request: []byte(`{"model":"m","messages":[{"role":"user","content":"title for: at 10:02"}],"stream":true}`)}
	g, r, _ := replayGateway(t, "anthropic", turn, title)
	ag := agentOf("anthropic", g.cfg.Placeholder)
	// Replayed: the title comes first this time, and the date moved on.
	ag.body = `{"model":"m","messages":[{"role":"user","content":"title for: at 11:40"}],"stream":true}`
	if _, _, body := call(t, g.URL(), ag); string(body) != `{"title":true}` {
		t.Errorf("the title request got %s, want the recorded title", body)
	}
	ag.body = `{"model":"m","messages":[{"role":"user","content":"at 11:40"}],"tools":[{"name":"Bash"}],"stream":true}`
	if _, _, body := call(t, g.URL(), ag); string(body) != `{"turn":true}` {
		t.Errorf("the turn's request got %s, want the recorded turn", body)
	}
	if r.Diverged() != nil {
		t.Error(r.Diverged())
	}
}
