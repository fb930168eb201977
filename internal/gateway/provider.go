package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// provider is what differs between the three APIs: where the key goes,
// how a refusal is written, how usage is read.
type provider struct {
	name string
	// setKey puts the key in the provider's own header.
	setKey func(h http.Header, key string)
	// refusal writes the gateway's own answer in the provider's error shape.
	refusal func(r refusal) []byte
	// normalise turns the provider's latest usage fields into a Usage.
	normalise func(w *wireUsage) Usage
}

var providers = map[string]provider{
	"anthropic": {
		name:      "anthropic",
		setKey:    func(h http.Header, key string) { h.Set("X-Api-Key", key) },
		refusal:   anthropicRefusal,
		normalise: anthropicUsage,
	},
	"openai": {
		name:      "openai",
		setKey:    func(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) },
		refusal:   openaiRefusal,
		normalise: openaiUsage,
	},
	"gemini": {
		name:      "gemini",
		setKey:    func(h http.Header, key string) { h.Set("X-Goog-Api-Key", key) },
		refusal:   geminiRefusal,
		normalise: geminiUsage,
	},
}

// credentialHeaders are the headers an agent's client may carry its key
// in, whatever the provider: all are taken off and checked.
var credentialHeaders = []string{"X-Api-Key", "X-Goog-Api-Key", "Api-Key", "Authorization"}

// refusal is an answer the gateway gives itself instead of forwarding.
type refusal struct {
	kind    string // see Refusal.Kind
	status  int
	message string
}

// refusalStatus is the HTTP status of each kind of refusal: a spent
// budget is the provider's quota answer.
var refusalStatus = map[string]int{
	RefusedBudget:     http.StatusTooManyRequests,
	RefusedCredential: http.StatusUnauthorized,
	RefusedTooLarge:   http.StatusRequestEntityTooLarge,
	RefusedPath:       http.StatusNotFound,
	RefusedUpstream:   http.StatusBadGateway,
}

// The error types each provider answers these statuses with.
var (
	anthropicTypes = map[string]string{
		RefusedBudget: "rate_limit_error", RefusedCredential: "authentication_error",
		RefusedTooLarge: "request_too_large", RefusedPath: "not_found_error", RefusedUpstream: "api_error",
		RefusedReplay: "invalid_request_error",
	}
	openaiTypes = map[string][2]string{ // type, code
		RefusedBudget:     {"insufficient_quota", "insufficient_quota"},
		RefusedCredential: {"invalid_request_error", "invalid_api_key"},
		RefusedTooLarge:   {"invalid_request_error", "request_too_large"},
		RefusedPath:       {"invalid_request_error", "not_found"},
		RefusedUpstream:   {"server_error", "upstream_unreachable"},
		RefusedReplay:     {"invalid_request_error", "replay_diverged"},
	}
	geminiStatuses = map[string]string{
		RefusedBudget: "RESOURCE_EXHAUSTED", RefusedCredential: "UNAUTHENTICATED",
		RefusedTooLarge: "INVALID_ARGUMENT", RefusedPath: "NOT_FOUND", RefusedUpstream: "UNAVAILABLE",
		RefusedReplay: "FAILED_PRECONDITION",
	}
)

func anthropicRefusal(r refusal) []byte {
	return mustJSON(map[string]any{"type": "error", "error": map[string]string{
		"type": anthropicTypes[r.kind], "message": r.message}})
}

func openaiRefusal(r refusal) []byte {
	t := openaiTypes[r.kind]
	return mustJSON(map[string]any{"error": map[string]any{
		"message": r.message, "type": t[0], "code": t[1], "param": nil}})
}

func geminiRefusal(r refusal) []byte {
	return mustJSON(map[string]any{"error": map[string]any{
		"code": r.status, "message": r.message, "status": geminiStatuses[r.kind]}})
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v) // maps of strings and numbers always encode
	return b
}

// modelOf is the model a request asks for: the body's "model"
// (Anthropic, OpenAI), else the path's /models/NAME:method (Gemini).
func modelOf(path string, body []byte) string {
	var q struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(body, &q) == nil && q.Model != "" {
		return q.Model
	}
	if i := strings.LastIndex(path, "/models/"); i >= 0 {
		name, _, _ := strings.Cut(path[i+len("/models/"):], ":")
		return name
	}
	return ""
}

// wireError is an error object as any of the three providers writes it.
type wireError struct {
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"` // OpenAI: a string; Gemini: the HTTP status
	Status  string          `json:"status"`
	Message string          `json:"message"`
}

// providerError reads a wire error as a ProviderError of an answer with
// status.
func (e *wireError) providerError(status int) *ProviderError {
	pe := &ProviderError{Status: status, Type: e.Type, Message: e.Message}
	var code string
	if json.Unmarshal(e.Code, &code) == nil {
		pe.Code = code
	}
	if pe.Type == "" {
		pe.Type = e.Status // Gemini's RESOURCE_EXHAUSTED and the like
	}
	if pe.Type == "" {
		pe.Type = pe.Code
	}
	if pe.Type == "" {
		pe.Type = statusType(status)
	}
	return pe
}

// statusType names an error status when the body does not.
func statusType(status int) string {
	if status == 529 {
		return "overloaded"
	}
	if t := http.StatusText(status); t != "" {
		return strings.ToLower(strings.ReplaceAll(t, " ", "_"))
	}
	return "status_" + strconv.Itoa(status)
}
