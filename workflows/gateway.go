package workflows

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/internal/gateway"
	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

var (
	gatewayKeys = []string{"key", "upstream", "record", "retry", "prices", "api", "base-url-env", "key-env"}
	priceKeys   = []string{"input", "output", "cache-read", "cache-write", "cache-write-1h"}
)

// gateway reads a `gateway:` value (docs/gateway.md): true, false or a
// mapping. false (nil) is no gateway; ctx names whose it is.
func (d *decoder) gateway(n *node, ctx, agent string) *steps.Gateway {
	ctx = prefix(ctx) + "gateway"
	if b, ok := n.value.(bool); ok && n.kind == scalarNode {
		if !b {
			return nil
		}
		return &steps.Gateway{}
	}
	f := d.fields(n, ctx+" (true, false or a mapping)", gatewayKeys)
	if f == nil {
		return nil
	}
	g := &steps.Gateway{}
	if v := f["key"]; v != nil {
		if s, ok := d.str(v, ctx+".key"); ok {
			if strings.TrimSpace(s) == "" {
				d.at(v.pos, "%s.key is empty: write an expression such as ${{ env.ANTHROPIC_API_KEY }}, or leave key out to read the preset's variable", ctx)
			}
			d.template(v, s, scope{agent: agent})
			g.Key = s
		}
	}
	if v := f["upstream"]; v != nil {
		g.Upstream = d.upstream(v, ctx)
	}
	if v := f["record"]; v != nil {
		g.Record, _ = d.boolean(v, ctx+".record")
	}
	if v := f["retry"]; v != nil {
		g.Retry, _ = d.integer(v, ctx+".retry (attempts in all)", 0)
	}
	if v := f["prices"]; v != nil {
		g.Prices = d.prices(v, ctx)
	}
	if v := f["api"]; v != nil {
		if s, ok := d.str(v, ctx+".api"); ok {
			if !slices.Contains(steps.GatewayAPIs, s) {
				d.at(v.pos, "%s.api: %q is not one of %s", ctx, s, strings.Join(steps.GatewayAPIs, ", "))
			}
			g.API = s
		}
	}
	for key, dst := range map[string]*string{"base-url-env": &g.BaseURLEnv, "key-env": &g.KeyEnv} {
		if v := f[key]; v != nil {
			if s, ok := d.literal(v, ctx+"."+key); ok {
				if s == "" || strings.ContainsAny(s, "=\x00 ") {
					d.at(v.pos, "%s.%s: %q is not a variable name", ctx, key, s)
				}
				*dst = s
			}
		}
	}
	return g
}

// upstream reads an upstream URL: https, or http to a loopback address.
func (d *decoder) upstream(v *node, ctx string) string {
	s, ok := d.literal(v, ctx+".upstream")
	if !ok {
		return ""
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		d.at(v.pos, "%s.upstream: %q is not an http(s) URL with a host, e.g. https://api.anthropic.com", ctx, s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		d.at(v.pos, "%s.upstream: %q: give the base URL only, without user, query or fragment", ctx, s)
	case u.Scheme == "http" && !isLoopbackHost(u.Hostname()):
		d.at(v.pos, "%s.upstream: %q: plain http is allowed to a loopback address only (the key would cross the network in clear); use https", ctx, s)
	}
	return s
}

func isLoopbackHost(h string) bool {
	return h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.")
}

// prices reads prices: MODEL: {input, output, cache-read, cache-write,
// cache-write-1h}, in USD per million tokens.
func (d *decoder) prices(n *node, ctx string) gateway.Prices {
	if !d.mapping(n, ctx+".prices") {
		return nil
	}
	out := gateway.Prices{}
	for i, k := range n.keys {
		model := k.value.(string)
		what := fmt.Sprintf("%s.prices.%s", ctx, model)
		f := d.fields(n.vals[i], what, priceKeys)
		if f == nil {
			continue
		}
		var p gateway.Price
		for key, dst := range map[string]*float64{"input": &p.Input, "output": &p.Output,
			"cache-read": &p.CacheRead, "cache-write": &p.CacheWrite, "cache-write-1h": &p.CacheWrite1h} {
			if v := f[key]; v != nil {
				*dst = d.price(v, what+"."+key)
			}
		}
		out[model] = p
	}
	return out
}

// price reads a price in USD per million tokens: a number, 0 or more.
func (d *decoder) price(v *node, what string) float64 {
	var x float64
	switch n := v.value.(type) {
	case int:
		x = float64(n)
	case float64:
		x = n
	default:
		d.wrong(v, "%s: want a price in USD per million tokens (a number), got %s", what, v.describe())
		return 0
	}
	if x < 0 || x > 1e6 {
		d.at(v.pos, "%s: want a price from 0 to 1000000 USD per million tokens, got %v", what, x)
	}
	return x
}

// defaultGateway reads the workflow's gateway: the default of every agent
// that sets none, builtins aside (they call no model). An agent it cannot
// wire is reported at the workflow's key, by name.
func (d *decoder) defaultGateway(n *node) {
	g := d.gateway(n, "", "")
	if g == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(d.agents)) {
		a := d.agents[name]
		if a.GatewaySet || a.Builtin != "" {
			continue
		}
		a.Gateway = g
		if msg := acpagent.CheckGateway(a); msg != "" {
			d.at(n.pos, "%s (from the workflow's gateway:; or give the agent gateway: false)", msg)
		}
	}
}

// gatewayKeyWarning says that a `gateway: true` agent's key variable is
// not set in acpflow's environment, where the gateway would read it ("":
// it is, or the gateway names its key).
func gatewayKeyWarning(a *steps.Agent, env Environment) string {
	if a.Gateway.Key != "" {
		return ""
	}
	keyEnv := a.Gateway.KeyEnv
	if w, ok := acpagent.GatewayOf(a.Preset); ok && keyEnv == "" {
		keyEnv = w.KeyEnv
	}
	if keyEnv == "" || env.Ambient[keyEnv] != "" {
		return ""
	}
	return fmt.Sprintf("agent %q: its gateway reads the provider key from %s, which is not set in acpflow's environment: the step will fail before the agent starts", a.Name, keyEnv)
}

// checkGatewayNetwork refuses an agent whose sandbox lets it reach its
// model gateway only (network: gateway) when it has no gateway: it could
// reach nothing, and would fail at its spawn. wfSandbox is the workflow's
// sandbox: node, where an agent that sets none got its network from.
// A replay agent is let be: a recording with model exchanges replays the
// real agent with a gateway, and one without plays with no network.
func (d *decoder) checkGatewayNetwork(wfSandbox *node) {
	for _, name := range slices.Sorted(maps.Keys(d.agents)) {
		a := d.agents[name]
		if a.Sandbox == nil || a.Sandbox.Network != steps.NetworkGateway || a.Gateway != nil || a.Builtin == replayagent.Name {
			continue
		}
		at := wfSandbox
		if a.SandboxSet {
			at = d.agentNodes[name].get("sandbox")
		}
		if at == nil {
			continue
		}
		d.at(at.pos, "agent %s: sandbox network: gateway lets it reach its model gateway only, and it has none: give it gateway: (docs/gateway.md), or use network: off", name)
	}
}
