package gateway

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
)

// Bounds on what the meter holds of one answer. A line or body past them
// is still forwarded whole; only its usage goes unread.
const (
	maxEventLine = 16 << 20 // one SSE line (OpenAI's response.completed repeats the whole output)
	maxJSONBody  = 16 << 20 // a non-streamed answer
)

// meter reads the provider's usage and errors from a copy of the answer
// as it streams past: server-sent events line by line, any other body
// whole at its end. It never changes what the agent gets.
type meter struct {
	provider provider
	status   int
	sse      bool
	gzip     bool // the body is compressed: kept whole and read at the end

	line  []byte // the SSE line so far
	data  []byte // the SSE event's data lines so far
	skip  bool   // the current line is past maxEventLine
	body  []byte // a non-SSE (or compressed) body
	over  bool   // body passed maxJSONBody
	usage wireUsage
	found bool   // some usage was read
	model string // the model the answer names
	err   *ProviderError
}

// Write takes the next bytes of the answer; it never fails.
func (m *meter) Write(p []byte) (int, error) {
	if !m.sse || m.gzip {
		if len(m.body)+len(p) > maxJSONBody {
			m.over = true
		} else {
			m.body = append(m.body, p...)
		}
		return len(p), nil
	}
	m.scan(p)
	return len(p), nil
}

// scan splits SSE bytes into lines.
func (m *meter) scan(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.grow(p)
			return
		}
		m.grow(p[:i])
		m.endLine()
		p = p[i+1:]
	}
}

func (m *meter) grow(p []byte) {
	if m.skip || len(m.line)+len(p) > maxEventLine {
		m.skip, m.line = true, m.line[:0]
		return
	}
	m.line = append(m.line, p...)
}

// endLine handles one SSE line: a data line adds to the event, an empty
// line ends it.
func (m *meter) endLine() {
	line := bytes.TrimSuffix(m.line, []byte("\r"))
	skipped := m.skip
	m.line, m.skip = m.line[:0], false
	switch {
	case skipped:
		m.data = m.data[:0]
	case len(line) == 0:
		if len(m.data) > 0 {
			m.object(m.data)
		}
		m.data = m.data[:0]
	case bytes.HasPrefix(line, []byte("data:")):
		d := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
		if len(m.data) > 0 {
			m.data = append(m.data, '\n')
		}
		m.data = append(m.data, d...)
	}
}

// finish reads what is left: the last event of a stream without a final
// blank line, or the whole body.
func (m *meter) finish() {
	if m.gzip && !m.over {
		zr, err := gzip.NewReader(bytes.NewReader(m.body))
		if err != nil {
			return
		}
		plain, err := io.ReadAll(io.LimitReader(zr, maxJSONBody))
		if err != nil {
			return
		}
		m.gzip, m.body = false, nil
		m.Write(plain)
	}
	if m.sse {
		m.endLine()
		m.endLine()
		return
	}
	if m.over {
		return
	}
	body := bytes.TrimSpace(m.body)
	if len(body) > 0 && body[0] == '[' { // Gemini's streamGenerateContent without alt=sse
		var all []json.RawMessage
		if json.Unmarshal(body, &all) == nil {
			for _, o := range all {
				m.object(o)
			}
		}
		return
	}
	m.object(body)
}

// wireObject is the part of any provider's answer (a body, an SSE
// event's data) that carries usage, the model, or an error.
type wireObject struct {
	Type          string          `json:"type"`
	Model         string          `json:"model"`
	ModelVersion  string          `json:"modelVersion"` // Gemini
	Usage         *wireUsage      `json:"usage"`
	UsageMetadata *wireUsage      `json:"usageMetadata"` // Gemini
	Message       json.RawMessage `json:"message"`       // Anthropic message_start: an object; OpenAI error event: a string
	Response      *wireObject     `json:"response"`      // OpenAI Responses events
	Error         *wireError      `json:"error"`
	Code          json.RawMessage `json:"code"` // OpenAI Responses error event
}

// object reads one JSON object of the answer. Only objects that can hold
// usage or an error are decoded: text deltas pass by a byte search. The
// model the answer names is read from those too (every provider names it
// beside the usage).
func (m *meter) object(b []byte) {
	if !bytes.Contains(b, []byte(`"usage`)) && !bytes.Contains(b, []byte(`"error`)) {
		return
	}
	var o wireObject
	if json.Unmarshal(b, &o) != nil {
		return
	}
	m.take(&o)
	if len(o.Message) > 0 && o.Message[0] == '{' {
		var inner wireObject
		if json.Unmarshal(o.Message, &inner) == nil {
			m.take(&inner)
		}
	}
	if o.Response != nil {
		m.take(o.Response)
	}
	if o.Type == "error" && o.Error == nil && len(o.Message) > 0 && o.Message[0] == '"' {
		var msg string
		json.Unmarshal(o.Message, &msg)
		m.err = (&wireError{Code: o.Code, Message: msg}).providerError(m.status)
	}
}

// take keeps what one object says: each usage field it has replaces the
// one read before, since every provider's later counts in a stream are
// running totals (Anthropic's message_delta, Gemini's usageMetadata).
func (m *meter) take(o *wireObject) {
	if o.Model != "" && m.model == "" {
		m.model = o.Model
	}
	if o.ModelVersion != "" && m.model == "" {
		m.model = o.ModelVersion
	}
	for _, u := range []*wireUsage{o.Usage, o.UsageMetadata} {
		if u != nil {
			m.usage.merge(u)
			m.found = true
		}
	}
	if o.Error != nil && (o.Error.Message != "" || o.Error.Type != "" || o.Error.Status != "") {
		m.err = o.Error.providerError(m.status)
	}
}

// wireUsage is a usage object as any of the providers writes it.
type wireUsage struct {
	// Anthropic, and OpenAI Responses (input_tokens holds the cached ones there).
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreation            *struct {
		Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"` // Anthropic's split of the cache writes by lifetime
	// OpenAI.
	PromptTokens            *int64       `json:"prompt_tokens"`
	CompletionTokens        *int64       `json:"completion_tokens"`
	PromptTokensDetails     *wireDetails `json:"prompt_tokens_details"`
	CompletionTokensDetails *wireDetails `json:"completion_tokens_details"`
	InputTokensDetails      *wireDetails `json:"input_tokens_details"`
	OutputTokensDetails     *wireDetails `json:"output_tokens_details"`
	// Gemini.
	PromptTokenCount        *int64 `json:"promptTokenCount"`
	CandidatesTokenCount    *int64 `json:"candidatesTokenCount"`
	CachedContentTokenCount *int64 `json:"cachedContentTokenCount"`
	ThoughtsTokenCount      *int64 `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount *int64 `json:"toolUsePromptTokenCount"`
}

type wireDetails struct {
	CachedTokens    *int64 `json:"cached_tokens"`
	ReasoningTokens *int64 `json:"reasoning_tokens"`
}

func (w *wireUsage) merge(o *wireUsage) {
	for _, f := range [][2]**int64{
		{&w.InputTokens, &o.InputTokens}, {&w.OutputTokens, &o.OutputTokens},
		{&w.CacheCreationInputTokens, &o.CacheCreationInputTokens}, {&w.CacheReadInputTokens, &o.CacheReadInputTokens},
		{&w.PromptTokens, &o.PromptTokens}, {&w.CompletionTokens, &o.CompletionTokens},
		{&w.PromptTokenCount, &o.PromptTokenCount}, {&w.CandidatesTokenCount, &o.CandidatesTokenCount},
		{&w.CachedContentTokenCount, &o.CachedContentTokenCount}, {&w.ThoughtsTokenCount, &o.ThoughtsTokenCount},
		{&w.ToolUsePromptTokenCount, &o.ToolUsePromptTokenCount},
	} {
		if *f[1] != nil {
			*f[0] = *f[1]
		}
	}
	if o.CacheCreation != nil {
		w.CacheCreation = o.CacheCreation
	}
	for _, d := range [][2]**wireDetails{
		{&w.PromptTokensDetails, &o.PromptTokensDetails}, {&w.CompletionTokensDetails, &o.CompletionTokensDetails},
		{&w.InputTokensDetails, &o.InputTokensDetails}, {&w.OutputTokensDetails, &o.OutputTokensDetails},
	} {
		if *d[1] != nil {
			*d[0] = *d[1]
		}
	}
}

// n is a count the provider sent, 0 when it sent none.
func n(p *int64) int64 {
	if p == nil {
		return 0
	}
	return clamp(*p)
}

func (d *wireDetails) cached() int64 {
	if d == nil {
		return 0
	}
	return n(d.CachedTokens)
}

func (d *wireDetails) reasoning() int64 {
	if d == nil {
		return 0
	}
	return n(d.ReasoningTokens)
}

// anthropicUsage: cache reads and writes are counted beside the input.
func anthropicUsage(w *wireUsage) Usage {
	u := Usage{Input: n(w.InputTokens), Output: n(w.OutputTokens),
		CacheRead: n(w.CacheReadInputTokens), CacheWrite: n(w.CacheCreationInputTokens)}
	if w.CacheCreation != nil {
		u.CacheWrite1h = min(n(w.CacheCreation.Ephemeral1h), u.CacheWrite)
	}
	return u
}

// openaiUsage: Chat Completions (prompt_tokens) or Responses
// (input_tokens); both count the cached tokens inside the input and the
// reasoning tokens inside the output.
func openaiUsage(w *wireUsage) Usage {
	if w.PromptTokens != nil || w.CompletionTokens != nil {
		cached := w.PromptTokensDetails.cached()
		return Usage{Input: max(0, n(w.PromptTokens)-cached), CacheRead: cached,
			Output: n(w.CompletionTokens), Thoughts: w.CompletionTokensDetails.reasoning()}
	}
	cached := w.InputTokensDetails.cached()
	return Usage{Input: max(0, n(w.InputTokens)-cached), CacheRead: cached,
		Output: n(w.OutputTokens), Thoughts: w.OutputTokensDetails.reasoning()}
}

// geminiUsage: the prompt count holds the cached tokens; thoughts are
// counted beside the candidates and billed as output.
func geminiUsage(w *wireUsage) Usage {
	cached := n(w.CachedContentTokenCount)
	thoughts := n(w.ThoughtsTokenCount)
	return Usage{Input: max(0, n(w.PromptTokenCount)+n(w.ToolUsePromptTokenCount)-cached), CacheRead: cached,
		Output: n(w.CandidatesTokenCount) + thoughts, Thoughts: thoughts}
}
