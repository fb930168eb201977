package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Answer is a recorded model exchange as a Replay gives it back: the
// request it answers (method, path with its query, model) and the answer.
type Answer struct {
	Method string
	Path   string
	Model  string
	// Status 0 is a request the agent gave up on before any answer came:
	// the replay keeps it waiting until the agent gives up again.
	Status      int
	ContentType string
	Body        []byte
	// Cut says the recorded body was cut at the record limit: it cannot
	// be given whole, and asking for it is a divergence.
	Cut bool
	// Request is the recorded request's body (decompressed), read for its
	// shape (requestShape); nil matches any.
	Request []byte
	shape   string
}

// Replay is a model provider on loopback that answers from a recording,
// for a gateway to forward to in place of the real one: a recorded agent
// runs again offline, deterministic, with no key. Each request takes the
// first recorded answer not yet given whose method and path (and model,
// when both name one) are the request's, preferring one whose request had
// the same shape: the recording's order, which two requests racing each
// other (claude's turn and its title, for the same model) cannot upset.
// A request no recorded answer is left for is the replay's divergence: it
// is answered with the provider's own error (400, not to be retried) and
// Diverged names it.
type Replay struct {
	provider provider
	ln       net.Listener
	srv      *http.Server

	mu       sync.Mutex
	answers  []Answer
	given    []bool
	requests int
	diverged error
}

// StartReplay serves answers in the shape of api (anthropic, openai,
// gemini) on 127.0.0.1 on a free port.
func StartReplay(api string, answers []Answer) (*Replay, error) {
	p, ok := providers[api]
	if !ok {
		return nil, fmt.Errorf("replay: provider %q is not one of anthropic, openai, gemini", api)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("replay: listen on loopback: %w", err)
	}
	answers = slices.Clone(answers)
	for i := range answers {
		answers[i].shape = requestShape(answers[i].Request)
	}
	r := &Replay{provider: p, ln: ln, answers: answers, given: make([]bool, len(answers))}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go r.srv.Serve(ln)
	return r, nil
}

// URL is the replay's base URL, without a path: a gateway's upstream is
// it followed by the recorded upstream's path.
func (r *Replay) URL() string { return "http://" + r.ln.Addr().String() }

// Close stops the replay; a request waiting on an abandoned answer ends.
func (r *Replay) Close() error { return r.srv.Close() }

// Diverged is the first request the recording had no answer for (nil:
// none so far).
func (r *Replay) Diverged() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.diverged
}

// Left is how many recorded answers were not asked for, and the first of
// them (nil: every one was given).
func (r *Replay) Left() (int, *Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, first := 0, (*Answer)(nil)
	for i, given := range r.given {
		if !given {
			if n++; first == nil {
				first = &r.answers[i]
			}
		}
	}
	return n, first
}

// Requests is how many model requests the replay got.
func (r *Replay) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// ServeHTTP answers a request with its recorded answer, a stream one
// event at a time as it came.
func (r *Replay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, maxRequestBody))
	path := pathOf(req.URL)
	plain := requestText(req.Header, body)
	a, err := r.take(req.Method, path, modelOf(req.URL.Path, plain), requestShape(plain))
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Should-Retry", "false")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(r.provider.refusal(refusal{kind: RefusedReplay, status: http.StatusBadRequest, message: "acpflow replay: " + err.Error()}))
		return
	}
	if a.Status == 0 {
		<-req.Context().Done()
		return
	}
	if a.ContentType != "" {
		w.Header().Set("Content-Type", a.ContentType)
	}
	w.WriteHeader(a.Status)
	if !strings.HasPrefix(strings.ToLower(a.ContentType), "text/event-stream") {
		w.Write(a.Body)
		return
	}
	flusher, _ := w.(http.Flusher)
	for rest := a.Body; len(rest) > 0; {
		n := bytes.Index(rest, []byte("\n\n"))
		if n < 0 {
			n = len(rest)
		} else {
			n += 2
		}
		if _, err := w.Write(rest[:n]); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		rest = rest[n:]
	}
}

// take gives request number n (counted here) its recorded answer, or
// says why there is none, which is the replay's divergence.
func (r *Replay) take(method, path, model, shape string) (*Answer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	n := r.requests
	i := r.match(method, path, model, shape)
	if i < 0 {
		return nil, r.diverge(fmt.Errorf("model request %d (%s %s) has no recorded answer%s", n, method, path, r.nextHint(model)))
	}
	r.given[i] = true
	a := &r.answers[i]
	if a.Cut {
		return nil, r.diverge(fmt.Errorf("model request %d (%s %s): its recorded answer was cut at the record limit and cannot be replayed", n, method, path))
	}
	return a, nil
}

// match is the index of the answer a request takes, -1 for none: the
// first left for its method, path and model whose request had its shape,
// else the first left for them.
func (r *Replay) match(method, path, model, shape string) int {
	first := -1
	for i := range r.answers {
		a := &r.answers[i]
		if r.given[i] || a.Method != method || a.Path != path || (a.Model != "" && model != "" && a.Model != model) {
			continue
		}
		if shape == "" || a.shape == "" || a.shape == shape {
			return i
		}
		if first < 0 {
			first = i
		}
	}
	return first
}

// requestShape is what tells apart two requests of an agent's that race
// for the same path and model: how long the conversation is, how many
// tools it offers, whether it streams. Not the text: a request holds the
// date, the cwd and ids that change every run. "" for a body that is not
// a JSON object (or was cut), which any shape matches.
func requestShape(body []byte) string {
	var q struct {
		Messages []json.RawMessage `json:"messages"` // Anthropic, Chat Completions
		Input    json.RawMessage   `json:"input"`    // Responses: a string or a list
		Contents []json.RawMessage `json:"contents"` // Gemini
		Tools    []json.RawMessage `json:"tools"`
		Stream   bool              `json:"stream"`
	}
	if len(body) == 0 || json.Unmarshal(body, &q) != nil {
		return ""
	}
	var input []json.RawMessage
	_ = json.Unmarshal(q.Input, &input)
	return fmt.Sprintf("items=%d tools=%d stream=%t", len(q.Messages)+len(input)+len(q.Contents), len(q.Tools), q.Stream)
}

// nextHint says what the recording holds instead, for a divergence.
func (r *Replay) nextHint(model string) string {
	for i, a := range r.answers {
		if !r.given[i] {
			hint := fmt.Sprintf(": the next recorded one is %s %s", a.Method, a.Path)
			if a.Model != "" && a.Model != model {
				hint += " for model " + a.Model
			}
			return hint
		}
	}
	return fmt.Sprintf(": the recording has %d, all given", len(r.answers))
}

// diverge keeps the first divergence and returns err.
func (r *Replay) diverge(err error) error {
	if r.diverged == nil {
		r.diverged = err
	}
	return err
}
