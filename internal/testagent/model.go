package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// callModel is -call-model: the turn asks the model as claude does, by
// POSTing a Messages request to $ANTHROPIC_BASE_URL/v1/messages with its
// $ANTHROPIC_API_KEY in x-api-key, and says the answer's text; a failed
// call is met with an apology, as real agents do. Each call is recorded
// (a model_call event: status, and the text or the error's body).
func (a *agent) callModel(t *turn) {
	calls := a.cfg.callModel
	if n, ok := promptedCalls(t.params); ok && calls > 0 {
		calls = n
	}
	for i := 0; i < calls; i++ {
		status, text := modelCall(t.n, i+1, a.cfg.streamModel)
		a.rec.event("model_call", map[string]any{"status": status, "text": text})
		if status != http.StatusOK {
			a.chunk(t.sessionID, fmt.Sprintf("Sorry, I could not reach the model (%d).\n", status))
			continue
		}
		a.chunk(t.sessionID, text+"\n")
	}
}

// promptedCalls reads "model calls: N" in the prompt's text: a prompt
// that asks another number of calls than -call-model (a replay whose
// agent asks something else).
func promptedCalls(params json.RawMessage) (int, bool) {
	var p struct {
		Prompt []struct {
			Text string `json:"text"`
		} `json:"prompt"`
	}
	_ = json.Unmarshal(params, &p)
	for _, b := range p.Prompt {
		if _, rest, ok := strings.Cut(b.Text, "model calls: "); ok {
			var n int
			if _, err := fmt.Sscanf(rest, "%d", &n); err == nil {
				return n, true
			}
		}
	}
	return 0, false
}

// modelCall makes one Messages request (streamed when stream is set);
// status 0 is a failed connection.
func modelCall(turn, n int, stream bool) (int, string) {
	body, _ := json.Marshal(map[string]any{
		"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": stream,
		"messages": []map[string]any{{"role": "user", "content": fmt.Sprintf("turn %d call %d", turn, n)}},
	})
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(os.Getenv("ANTHROPIC_BASE_URL"), "/")+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", os.Getenv("ANTHROPIC_API_KEY"))
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(b)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, streamedText(b)
	}
	var m struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(b, &m) != nil || len(m.Content) == 0 {
		return resp.StatusCode, string(b)
	}
	return resp.StatusCode, m.Content[0].Text
}

// streamedText joins the text deltas of a Messages event stream.
func streamedText(stream []byte) string {
	var text strings.Builder
	for _, line := range strings.Split(string(stream), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil {
			text.WriteString(ev.Delta.Text)
		}
	}
	return text.String()
}
