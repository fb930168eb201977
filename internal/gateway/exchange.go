package gateway

import (
	"bytes"
	"fmt"
	"strings"
	"time"
)

// Exchange is one request the agent made through the gateway and how it
// ended. It never holds the key or the placeholder: every string and body
// in it is scrubbed of both.
type Exchange struct {
	Started time.Time `json:"started"`
	Method  string    `json:"method"`
	// Path is the request's path and query as the agent sent it, without
	// a key= parameter.
	Path  string `json:"path"`
	Model string `json:"model,omitempty"`
	// Status is the HTTP status the agent got (the provider's, or the
	// gateway's own when Refusal is set).
	Status int `json:"status"`
	// Attempts is how many requests went to the provider (more than one
	// when retried; 0 when refused before any).
	Attempts int `json:"attempts"`
	// Error is the provider's error: an error status, or an error event
	// in a stream that began well.
	Error *ProviderError `json:"error,omitempty"`
	// Refusal is set when the gateway answered itself.
	Refusal *Refusal `json:"refusal,omitempty"`
	// Usage is what the answer said it cost; Metered says whether it said
	// anything (false for an error, a refusal, or a stream cut before its
	// usage).
	Usage   Usage `json:"usage"`
	Metered bool  `json:"metered"`
	// Duration is from the request's arrival to the answer's end;
	// FirstByte from its arrival to the first byte of the answer's body
	// (0 when none came).
	Duration  time.Duration `json:"duration"`
	FirstByte time.Duration `json:"first_byte,omitempty"`
	// ContentType is the answer's Content-Type (a stream's is
	// text/event-stream): what a replay answers with.
	ContentType string `json:"content_type,omitempty"`
	// Request and Response are the bodies (the request decompressed, the
	// answer as it came, a stream byte for byte), kept only with
	// Config.Record, each cut at Config.RecordLimit (Truncated says so,
	// and RequestCut or ResponseCut which).
	Request     []byte `json:"request,omitempty"`
	Response    []byte `json:"response,omitempty"`
	Truncated   bool   `json:"truncated,omitempty"`
	RequestCut  bool   `json:"-"`
	ResponseCut bool   `json:"-"`
}

// ProviderError is an error a provider answered with: 401, 403, 429, 529,
// a quota, a 5xx, or an error event in a stream.
type ProviderError struct {
	// Status is the answer's HTTP status (200 for an error event in a
	// stream).
	Status int `json:"status"`
	// Type is the provider's own name for it: Anthropic's error type
	// (rate_limit_error, overloaded_error), OpenAI's type
	// (insufficient_quota), Gemini's status (RESOURCE_EXHAUSTED); the
	// status's name when the body has none.
	Type string `json:"type"`
	// Code is OpenAI's error code (rate_limit_exceeded, invalid_api_key).
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

func (e *ProviderError) Error() string {
	s := fmt.Sprintf("the provider answered %d %s", e.Status, e.Type)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// The kinds of ProviderError, for a step's error to name.
const (
	ErrorAuthentication = "authentication" // the key is wrong or revoked
	ErrorPermission     = "permission"     // the key may not use this model or API
	ErrorQuota          = "quota"          // the account's credit or quota is spent
	ErrorRateLimit      = "rate-limit"     // too many requests or tokens for now
	ErrorOverloaded     = "overloaded"     // the provider is busy
	ErrorServer         = "server"         // another 5xx, or a failed stream
	ErrorRequest        = "request"        // the request itself was refused
)

// Kind sorts the error into one of the Error* kinds, from the provider's
// type and code first (a 429 is a quota or a rate limit by its type, a
// stream's error has status 200) and its status else. Two quotas are told
// by their words only: Gemini's RESOURCE_EXHAUSTED says "quota" when it is
// one, and Anthropic's spent credit is a 400 invalid_request_error whose
// message says "credit balance".
func (e *ProviderError) Kind() string {
	words := strings.ToLower(e.Type + " " + e.Code)
	msg := strings.ToLower(e.Message)
	switch {
	case containsAny(words, "quota", "billing", "credit") || strings.Contains(msg, "credit balance") ||
		(strings.Contains(words, "resource_exhausted") && strings.Contains(msg, "quota")):
		return ErrorQuota
	case containsAny(words, "overloaded", "unavailable") || e.Status == 529 || e.Status == 503:
		return ErrorOverloaded
	case containsAny(words, "rate_limit", "resource_exhausted") || e.Status == 429:
		return ErrorRateLimit
	case containsAny(words, "authentication", "invalid_api_key", "unauthenticated") || e.Status == 401:
		return ErrorAuthentication
	case containsAny(words, "permission") || e.Status == 403:
		return ErrorPermission
	case e.Status >= 500 || e.Status < 400:
		return ErrorServer
	}
	return ErrorRequest
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Refusal is the gateway's reason for answering a request itself.
type Refusal struct {
	Kind    string `json:"kind"`    // one of the Refused* constants
	Message string `json:"message"` // what the agent was told
}

// The kinds of Refusal.
const (
	RefusedBudget     = "budget"     // Config.Allow said no
	RefusedCredential = "credential" // no placeholder, or another key
	RefusedTooLarge   = "too-large"  // a request body over maxRequestBody
	RefusedPath       = "path"       // a path outside Upstream's
	RefusedUpstream   = "upstream"   // the provider could not be reached
	// RefusedReplay is a Replay's answer to a request its recording has
	// no answer for; the gateway forwards it as the provider's.
	RefusedReplay = "replay"
)

// maxMessage bounds a provider's error message kept in an Exchange.
const maxMessage = 2048

// scrubber removes the key and the placeholder from what the gateway
// keeps or says.
type scrubber struct {
	olds [][]byte
	repl *strings.Replacer
}

const redacted = "[redacted]"

func newScrubber(secrets ...string) *scrubber {
	s := &scrubber{}
	var pairs []string
	for _, v := range secrets {
		if v != "" {
			s.olds = append(s.olds, []byte(v))
			pairs = append(pairs, v, redacted)
		}
	}
	s.repl = strings.NewReplacer(pairs...)
	return s
}

func (s *scrubber) string(v string) string { return s.repl.Replace(v) }

func (s *scrubber) bytes(b []byte) []byte {
	for _, old := range s.olds {
		if bytes.Contains(b, old) {
			b = bytes.ReplaceAll(b, old, []byte(redacted))
		}
	}
	return b
}

// message bounds and scrubs a message for an Exchange.
func (s *scrubber) message(m string) string {
	m = s.string(m)
	if len(m) > maxMessage {
		m = strings.ToValidUTF8(m[:maxMessage], "") + "…"
	}
	return m
}
