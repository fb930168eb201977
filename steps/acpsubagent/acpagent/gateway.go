package acpagent

import (
	"encoding/json"
	"fmt"

	"github.com/acpflow/acpflow/internal/gateway"
)

// GatewayWiring is how a preset's agent is pointed at a model gateway
// (docs/gateway.md): the API it speaks, where it reads its base URL and
// key from, and what else of its credentials must not reach it.
type GatewayWiring struct {
	// API is the provider API the agent speaks: anthropic, openai, gemini.
	API string
	// BaseURLEnv is the variable the agent reads its model's base URL
	// from; "" when Configure gives it.
	BaseURLEnv string
	// KeyEnv is the variable the agent reads its key from: `gateway:
	// true` takes the real key from it in acpflow's environment, and the
	// agent gets the placeholder in it.
	KeyEnv string
	// PlaceholderEnv are other variables the agent (or its adapter) may
	// read a key from: they get the placeholder too.
	PlaceholderEnv []string
	// DropEnv are credentials the agent must not get at all under a
	// gateway (another provider's token the agent would prefer).
	DropEnv []string
	// Configure points the agent at url with the placeholder where no
	// variable does (a config given in an env variable); nil: none.
	// It is given the API the agent speaks (a workflow's api: may change
	// the preset's).
	Configure func(api string, env map[string]string, url, placeholder string) error
}

// Vars are every variable the wiring sets or removes: what the env
// policy neither sees nor decides under a gateway.
func (w GatewayWiring) Vars() []string {
	out := append([]string{w.KeyEnv}, w.PlaceholderEnv...)
	out = append(out, w.DropEnv...)
	if w.BaseURLEnv != "" {
		out = append(out, w.BaseURLEnv)
	}
	return out
}

// gatewayWirings are the presets' wirings; a preset without one (goose)
// needs api:, base-url-env: and key-env: in the workflow.
var gatewayWirings = map[string]GatewayWiring{
	"claude": {API: "anthropic", BaseURLEnv: "ANTHROPIC_BASE_URL", KeyEnv: "ANTHROPIC_API_KEY",
		DropEnv: []string{"ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}},
	"gemini": {API: "gemini", BaseURLEnv: "GOOGLE_GEMINI_BASE_URL", KeyEnv: "GEMINI_API_KEY",
		DropEnv: []string{"GOOGLE_API_KEY"}},
	"qwen": {API: "openai", BaseURLEnv: "OPENAI_BASE_URL", KeyEnv: "OPENAI_API_KEY",
		DropEnv: []string{"DASHSCOPE_API_KEY"}},
	"opencode": {API: "openai", KeyEnv: "OPENAI_API_KEY", Configure: opencodeGateway},
	"codex": {API: "openai", KeyEnv: "OPENAI_API_KEY", PlaceholderEnv: []string{"CODEX_API_KEY"},
		Configure: codexGateway},
}

// GatewayOf is the preset's wiring, if it has one.
func GatewayOf(preset string) (GatewayWiring, bool) {
	w, ok := gatewayWirings[preset]
	return w, ok
}

// opencodeProviders are opencode's provider ids for each API.
var opencodeProviders = map[string]string{"openai": "openai", "anthropic": "anthropic", "gemini": "google"}

// opencodeGateway points opencode's provider at the gateway by merging
// `provider.ID.options` {baseURL, apiKey: placeholder} into
// OPENCODE_CONFIG_CONTENT (the preset's own config, or the workflow's),
// which opencode merges over the user's config files: nothing is written
// under HOME.
func opencodeGateway(api string, env map[string]string, url, placeholder string) error {
	cfg := map[string]any{}
	if raw := env["OPENCODE_CONFIG_CONTENT"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
			return fmt.Errorf("OPENCODE_CONFIG_CONTENT is not a JSON object, so the gateway cannot be added to it: %v", err)
		}
	}
	providers, _ := cfg["provider"].(map[string]any)
	if providers == nil {
		providers = map[string]any{}
	}
	id := opencodeProviders[api]
	p, _ := providers[id].(map[string]any)
	if p == nil {
		p = map[string]any{}
	}
	opts, _ := p["options"].(map[string]any)
	if opts == nil {
		opts = map[string]any{}
	}
	opts["baseURL"], opts["apiKey"] = url, placeholder
	p["options"], providers[id], cfg["provider"] = opts, p, providers
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	env["OPENCODE_CONFIG_CONTENT"] = string(b)
	return nil
}

// codexGateway gives codex a model provider of acpflow's whose base_url
// is the gateway and whose key is read from OPENAI_API_KEY (the
// placeholder), through CODEX_CONFIG, which codex-acp passes to codex as
// -c overrides: codex ignores OPENAI_BASE_URL, and with its own provider
// it needs no login of the user's.
func codexGateway(_ string, env map[string]string, url, _ string) error {
	cfg := map[string]any{
		"model_provider": "acpflow-gateway",
		"model_providers": map[string]any{"acpflow-gateway": map[string]any{
			"name": "acpflow-gateway", "base_url": url, "env_key": "OPENAI_API_KEY",
			"wire_api": "responses", "requires_openai_auth": false, "supports_websockets": false,
		}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	env["CODEX_CONFIG"] = string(b)
	return nil
}

// GatewayExchange is one model request the agent made through its
// gateway, as the gateway saw it (keys removed): recorded in the run's
// events, with the bodies when the gateway records them.
type GatewayExchange struct {
	Method      string                 `json:"method"`
	Path        string                 `json:"path"`
	Model       string                 `json:"model,omitempty"`
	Status      int                    `json:"status"`
	Attempts    int                    `json:"attempts"`
	Error       *gateway.ProviderError `json:"error,omitempty"`
	ErrorKind   string                 `json:"error_kind,omitempty"`
	Refusal     *gateway.Refusal       `json:"refusal,omitempty"`
	Usage       *gateway.Usage         `json:"usage,omitempty"`
	DurationMS  int64                  `json:"duration_ms"`
	FirstByteMS int64                  `json:"first_byte_ms,omitempty"`
	Request     string                 `json:"request,omitempty"`
	Response    string                 `json:"response,omitempty"`
	Truncated   bool                   `json:"truncated,omitempty"`
}

func (GatewayExchange) EventType() string  { return "step_update" }
func (GatewayExchange) UpdateKind() string { return "gateway_exchange" }

// ExchangeEvent is x as an event.
func ExchangeEvent(x gateway.Exchange) GatewayExchange {
	ev := GatewayExchange{
		Method: x.Method, Path: x.Path, Model: x.Model, Status: x.Status, Attempts: x.Attempts,
		Error: x.Error, Refusal: x.Refusal, DurationMS: x.Duration.Milliseconds(),
		FirstByteMS: x.FirstByte.Milliseconds(), Request: string(x.Request), Response: string(x.Response),
		Truncated: x.Truncated,
	}
	if x.Error != nil {
		ev.ErrorKind = x.Error.Kind()
	}
	if x.Metered {
		u := x.Usage
		ev.Usage = &u
	}
	return ev
}
