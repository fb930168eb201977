package steps

import (
	"fmt"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/internal/egress"
)

// Sandbox is what `sandbox:` asks of an agent's confinement
// (docs/sandbox.md): the kernel (Landlock and namespaces) holds the
// agent's whole process group to it, whatever the agent asks or runs
// unasked.
type Sandbox struct {
	// Write are paths writable besides the step's cwd, a private temp
	// dir and the preset's state dirs; relative ones are the workspace's.
	Write []string `json:"write,omitempty"`
	// Deny are paths unreadable besides the default list (ssh, gpg,
	// cloud, registry and agents' credentials).
	Deny []string `json:"deny,omitempty"`
	// Network is NetworkOn, NetworkOff or NetworkList (Allow the hosts).
	Network string   `json:"network"`
	Allow   []string `json:"allow,omitempty"`
	// Optional: a kernel that cannot enforce it runs the agent
	// unsandboxed, with a warning (`required: false`); else the step fails
	// before the spawn.
	Optional bool `json:"optional,omitempty"`
}

// Network modes of a sandbox.
const (
	NetworkOn   = "on"
	NetworkOff  = "off"
	NetworkList = "list"
)

// SandboxKeys are the keys of a `sandbox:` mapping.
var SandboxKeys = []string{"write", "deny", "network", "required"}

// ParseSandbox reads a decoded `sandbox:` value: true (the defaults),
// false (none: nil), or a mapping of SandboxKeys, each network host
// checked as the step's proxy will read it. An error is a *FieldError at
// the key at fault.
func ParseSandbox(v any) (*Sandbox, error) {
	switch x := v.(type) {
	case bool:
		if !x {
			return nil, nil
		}
		return &Sandbox{Network: NetworkOn}, nil
	case map[string]any:
		sb := &Sandbox{Network: NetworkOn}
		for k := range x {
			if !slices.Contains(SandboxKeys, k) {
				return nil, FieldErrorf([]string{k}, "sandbox: unknown key %q (known: %s)", k, strings.Join(SandboxKeys, ", "))
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
			if n != NetworkOn && n != NetworkOff {
				return nil, FieldErrorf([]string{"network"}, "sandbox.network: want on, off or a list of hosts (host or host:port), got %q", n)
			}
			sb.Network = n
		case bool: // YAML 1.1 readers may give on/off as booleans
			sb.Network = map[bool]string{true: NetworkOn, false: NetworkOff}[n]
		case []any:
			sb.Network = NetworkList
			for i, h := range n {
				s, ok := h.(string)
				if !ok || s == "" {
					return nil, FieldErrorf([]string{"network"}, "sandbox.network[%d]: want a host or host:port", i)
				}
				if _, err := egress.ParseAllow([]string{s}); err != nil {
					return nil, FieldErrorf([]string{"network"}, "sandbox.network[%d]: %v", i, err)
				}
				sb.Allow = append(sb.Allow, s)
			}
		default:
			return nil, FieldErrorf([]string{"network"}, "sandbox.network: want on, off or a list of hosts")
		}
		if r, ok := x["required"]; ok {
			b, isBool := r.(bool)
			if !isBool {
				return nil, FieldErrorf([]string{"required"}, "sandbox.required: want true or false")
			}
			sb.Optional = !b
		}
		return sb, nil
	}
	return nil, FieldErrorf(nil, "sandbox: want true, false or a mapping with write, deny, network, required")
}

// pathList reads one list of paths of a sandbox mapping.
func pathList(m map[string]any, key string) ([]string, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, FieldErrorf([]string{key}, "sandbox.%s: want a list of paths", key)
	}
	out := make([]string, 0, len(list))
	for i, p := range list {
		s, ok := p.(string)
		if !ok || s == "" {
			return nil, FieldErrorf([]string{key}, "sandbox.%s[%d]: want a path", key, i)
		}
		out = append(out, s)
	}
	return out, nil
}

// String describes the sandbox for messages.
func (s *Sandbox) String() string {
	if s == nil {
		return "none"
	}
	net := s.Network
	if net == NetworkList {
		net = strings.Join(s.Allow, ", ")
	}
	return fmt.Sprintf("write %v, deny %v, network %s", s.Write, s.Deny, net)
}

// SandboxRecord is what a step's sandbox enforced (the result's
// `sandbox`): the kernel's part and the lists, or, for `required: false`
// on a kernel that could not enforce it, nothing and the warning.
type SandboxRecord struct {
	// Enforced is false when the agent ran unsandboxed (Warning says why).
	Enforced bool `json:"enforced"`
	// LandlockABI is the kernel's Landlock ABI version that enforced it.
	LandlockABI int `json:"landlock_abi,omitempty"`
	// Write are the writable paths: the cwd, the private temp dir, the
	// preset's state dirs and write:.
	Write []string `json:"write,omitempty"`
	// Deny are the unreadable paths: the default list and deny:.
	Deny []string `json:"deny,omitempty"`
	// Network is on, off or list; Allow the hosts of a list, reached
	// through the step's proxy.
	Network string   `json:"network"`
	Allow   []string `json:"allow,omitempty"`
	// Refused are the hosts the proxy refused, in order (at most 100).
	Refused []string `json:"refused,omitempty"`
	Warning string   `json:"warning,omitempty"`
}
