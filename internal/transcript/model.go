package transcript

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// MaxModelBytes bounds the model exchanges kept of one attempt (their
// JSON): past it no exchange is kept and Model.Truncated says so. With
// MaxBytes of messages it stays well within MaxStepBytes, so that a file
// holding it is read back.
const MaxModelBytes = 24 << 20

// Model is the model side of an attempt whose agent's gateway recorded
// (`gateway: {record: true}`): the agent that ran, so that `builtin:
// replay` can run it again, and every model request it made through the
// gateway with the answer it got, in the order the requests came. It
// never holds the provider key nor the placeholder: the gateway removed
// both, and the attempt's other secrets were scrubbed as from its
// messages.
type Model struct {
	Agent ModelAgent `json:"agent"`
	// API is the provider API the agent spoke (anthropic, openai,
	// gemini); Upstream the provider's base URL the gateway forwarded to
	// (its path is the one the agent's requests begin with).
	API       string     `json:"api"`
	Upstream  string     `json:"upstream"`
	Exchanges []Exchange `json:"exchanges"`
	// Truncated says exchanges past MaxModelBytes were not kept: such a
	// recording cannot be replayed past its last kept exchange.
	Truncated bool `json:"truncated,omitempty"`
}

// ModelAgent is how the recorded agent was started and its session set:
// what a replay starts again. Args are as rendered, scrubbed of the
// attempt's secrets; the agent's env is not kept (its values may be
// secrets): a replay gives the env of its own workflow's agent.
type ModelAgent struct {
	Preset  string            `json:"preset,omitempty"`
	Command string            `json:"command"`
	Args    []string          `json:"args,omitempty"`
	Auth    string            `json:"auth,omitempty"`
	Mode    string            `json:"mode,omitempty"`
	Config  map[string]string `json:"config,omitempty"`
	// BaseURLEnv and KeyEnv are the gateway wiring of an agent no preset
	// wires (a command of the workflow's own); "" for a preset's.
	BaseURLEnv string `json:"base_url_env,omitempty"`
	KeyEnv     string `json:"key_env,omitempty"`
}

// Exchange is one model request through the gateway and its answer.
type Exchange struct {
	AtMS   int64  `json:"at_ms"` // when the request came, since the attempt began
	Method string `json:"method"`
	// Path is the request's path and query, without a key= parameter.
	Path  string `json:"path"`
	Model string `json:"model,omitempty"`
	// Status is the answer's HTTP status; 0 when the agent gave up on the
	// request before any answer came.
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	// Refused is the kind of the gateway's own answer, when the request
	// never reached the provider (a spent budget, a wrong credential).
	Refused string `json:"refused,omitempty"`
	// Request and Response are the bodies, a streamed answer byte for
	// byte, each cut at the gateway's record limit (the Truncated flags).
	Request           Body `json:"request,omitempty"`
	Response          Body `json:"response,omitempty"`
	RequestTruncated  bool `json:"request_truncated,omitempty"`
	ResponseTruncated bool `json:"response_truncated,omitempty"`
}

// Body is a recorded HTTP body: in the file, a string when it is UTF-8
// (every provider's JSON and event streams), else {"base64": "…"}, so
// that every byte comes back as it was.
type Body []byte

// MarshalJSON writes b as a string, or as base64 when it is not UTF-8.
func (b Body) MarshalJSON() ([]byte, error) {
	if utf8.Valid(b) {
		return json.Marshal(string(b))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString(b)})
}

// UnmarshalJSON reads either form MarshalJSON writes.
func (b *Body) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*b = Body(s)
		return nil
	}
	var enc struct {
		Base64 *string `json:"base64"`
	}
	if err := json.Unmarshal(data, &enc); err != nil || enc.Base64 == nil {
		return errors.New("a body is a string or {\"base64\": …}")
	}
	raw, err := base64.StdEncoding.DecodeString(*enc.Base64)
	if err != nil {
		return err
	}
	*b = raw
	return nil
}

// Size is the length of x's JSON, which the bounds count.
func (x *Exchange) Size() int {
	b, err := json.Marshal(x)
	if err != nil {
		return MaxModelBytes + 1
	}
	return len(b)
}
