package confine

import (
	"slices"
	"strings"

	"github.com/acpflow/acpflow/internal/egress"
	"github.com/acpflow/acpflow/steps"
)

// Keys are the keys of a `sandbox:` mapping.
var Keys = []string{"write", "deny", "network", "required"}

// Parse reads a decoded `sandbox:` value: true (the defaults),
// false (none: nil), or a mapping of Keys, each network host
// checked as the step's proxy will read it. An error is a *FieldError at
// the key at fault.
func Parse(v any) (*steps.Sandbox, error) {
	switch x := v.(type) {
	case bool:
		if !x {
			return nil, nil
		}
		return &steps.Sandbox{Network: steps.NetworkOn}, nil
	case map[string]any:
		sb := &steps.Sandbox{Network: steps.NetworkOn}
		for k := range x {
			if !slices.Contains(Keys, k) {
				return nil, steps.FieldErrorf([]string{k}, "sandbox: unknown key %q (known: %s)", k, strings.Join(Keys, ", "))
			}
		}
		var err error
		if sb.Write, err = pathList(x, "write"); err != nil {
			return nil, err
		}
		if sb.Deny, err = pathList(x, "deny"); err != nil {
			return nil, err
		}
		switch n := x["network"].(type) {
		case nil:
		case string:
			if n != steps.NetworkOn && n != steps.NetworkOff && n != steps.NetworkGateway {
				return nil, steps.FieldErrorf([]string{"network"}, "sandbox.network: want on, off, gateway or a list of hosts (host or host:port), got %q", n)
			}
			sb.Network = n
		case bool: // YAML 1.1 readers may give on/off as booleans
			sb.Network = map[bool]string{true: steps.NetworkOn, false: steps.NetworkOff}[n]
		case []any:
			sb.Network = steps.NetworkList
			for i, h := range n {
				s, ok := h.(string)
				if !ok || s == "" {
					return nil, steps.FieldErrorf([]string{"network"}, "sandbox.network[%d]: want a host or host:port", i)
				}
				if _, err := egress.ParseAllow([]string{s}); err != nil {
					return nil, steps.FieldErrorf([]string{"network"}, "sandbox.network[%d]: %v", i, err)
				}
				sb.Allow = append(sb.Allow, s)
			}
		default:
			return nil, steps.FieldErrorf([]string{"network"}, "sandbox.network: want on, off, gateway or a list of hosts")
		}
		if r, ok := x["required"]; ok {
			b, isBool := r.(bool)
			if !isBool {
				return nil, steps.FieldErrorf([]string{"required"}, "sandbox.required: want true or false")
			}
			sb.Optional = !b
		}
		return sb, nil
	}
	return nil, steps.FieldErrorf(nil, "sandbox: want true, false or a mapping with write, deny, network, required")
}

// pathList reads one list of paths of a sandbox mapping.
func pathList(m map[string]any, key string) ([]string, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, steps.FieldErrorf([]string{key}, "sandbox.%s: want a list of paths", key)
	}
	out := make([]string, 0, len(list))
	for i, p := range list {
		s, ok := p.(string)
		if !ok || s == "" {
			return nil, steps.FieldErrorf([]string{key}, "sandbox.%s[%d]: want a path", key, i)
		}
		out = append(out, s)
	}
	return out, nil
}
