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
	for i := 0; i < a.cfg.callModel; i++ {
		status, text := modelCall(t.n, i+1)
		a.rec.event("model_call", map[string]any{"status": status, "text": text})
		if status != http.StatusOK {
			a.chunk(t.sessionID, fmt.Sprintf("Sorry, I could not reach the model (%d).\n", status))
			continue
		}
		a.chunk(t.sessionID, text+"\n")
	}
}

// modelCall makes one Messages request; status 0 is a failed connection.
func modelCall(turn, n int) (int, string) {
	body, _ := json.Marshal(map[string]any{
		"model": "claude-sonnet-4-5", "max_tokens": 64,
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
