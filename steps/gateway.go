package steps

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/internal/gateway"
)

// Gateway is an agent's `gateway:` (docs/gateway.md): acpflow serves the
// agent's model API for each step and holds the provider key, which the
// agent never gets.
type Gateway struct {
	// Key is the provider key, a template (`${{ env.ANTHROPIC_API_KEY }}`)
	// rendered at run time; "" takes it from acpflow's own environment,
	// from the variable KeyEnv (or the preset's) names.
	Key string `json:"-"`
	// Upstream is the provider's base URL; "" is the preset's (or the
	// API's) provider.
	Upstream string `json:"upstream,omitempty"`
	// Record keeps each exchange (keys removed) in the transcript.
	Record bool `json:"record,omitempty"`
	// Retry is how many times a 429 or overloaded answer is tried in all;
	// 0 does not retry.
	Retry int `json:"retry,omitempty"`
	// Prices override the default price table, by model.
	Prices gateway.Prices `json:"prices,omitempty"`
	// API ("anthropic", "openai", "gemini"), BaseURLEnv and KeyEnv say how
	// an agent no preset knows is pointed at the gateway: the API it
	// speaks, the variable it reads its base URL from and the one it reads
	// its key from. Empty: the preset's.
	API        string `json:"api,omitempty"`
	BaseURLEnv string `json:"base-url-env,omitempty"`
	KeyEnv     string `json:"key-env,omitempty"`
}

// GatewayAPIs are the provider APIs a gateway serves.
var GatewayAPIs = []string{"anthropic", "openai", "gemini"}

// DefaultUpstream is the provider each API goes to when neither the
// workflow nor the preset names one.
var DefaultUpstream = map[string]string{
	"anthropic": "https://api.anthropic.com",
	"openai":    "https://api.openai.com/v1",
	"gemini":    "https://generativelanguage.googleapis.com",
}

// String describes the gateway's settings, never its key (a template at
// most): part of what makes two reused processes the same.
func (g *Gateway) String() string {
	if g == nil {
		return "none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "key=%q upstream=%q record=%t retry=%d api=%q base-url-env=%q key-env=%q",
		g.Key, g.Upstream, g.Record, g.Retry, g.API, g.BaseURLEnv, g.KeyEnv)
	for _, m := range slices.Sorted(maps.Keys(g.Prices)) {
		fmt.Fprintf(&b, " price[%s]=%v", m, g.Prices[m])
	}
	return b.String()
}
