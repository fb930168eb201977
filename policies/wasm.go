package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/acpflow/acpflow/wasm"
)

// NewWASMLoader returns the WASMLoader that ParsePermission and ParseEnv
// take: it loads the module with host, under the file's limits, and makes
// a WASMPermission for KindPermission or a WASMEnv (proposing DefaultEnv's
// environment: the wasm form replaces inherit and scrub-credentials) for
// KindEnv. ctx bounds the loads, which compile.
// SharedWASMLoader loads modules into one wasm.Host per process, created on
// first use: compiling a module is what costs (a Go module takes a second
// and a half), so every workflow and policy file a process loads shares the
// host's cache of compiled modules.
func SharedWASMLoader() WASMLoader {
	return func(path, kind string, config map[string]any, limits Limits) (any, error) {
		shared.once.Do(func() { shared.host, shared.err = wasm.NewHost(context.Background()) })
		if shared.err != nil {
			return nil, fmt.Errorf("start the WASM host: %w", shared.err)
		}
		return NewWASMLoader(context.Background(), shared.host)(path, kind, config, limits)
	}
}

var shared struct {
	once sync.Once
	host *wasm.Host
	err  error
}

func NewWASMLoader(ctx context.Context, host *wasm.Host) WASMLoader {
	return func(path, kind string, config map[string]any, limits Limits) (any, error) {
		m, err := host.Load(ctx, path, wasm.Limits{Memory: limits.Memory, Timeout: limits.Timeout})
		if err != nil {
			return nil, err
		}
		switch kind {
		case KindPermission:
			return NewWASMPermission(m, "", config), nil
		case KindEnv:
			return NewWASMEnv(m, "", config), nil
		}
		return nil, fmt.Errorf("policy module %s: no %q policy kind; want %s or %s", path, kind, KindPermission, KindEnv)
	}
}

// WASMPermission is a permission policy decided by a WASM module (SPEC §5):
// it sends the PermissionRequest, with the policy's config, and reads
// {"decision": "...", "reason": "..."}.
type WASMPermission struct {
	module *wasm.Module
	name   string
	config map[string]any
}

var _ Permission = (*WASMPermission)(nil)

// NewWASMPermission makes a permission policy of m. name is recorded as the
// rule of every verdict ("" means the module's file name, as SPEC §6
// records it); config is sent as the request's "config".
func NewWASMPermission(m *wasm.Module, name string, config map[string]any) *WASMPermission {
	return &WASMPermission{module: m, name: ruleName(m, name), config: configOrEmpty(config)}
}

// DecidePermission asks the module. Every failure is an error, with the
// verdict's Rule still naming the module, so Answer rejects and records
// which module failed and why.
//
// # Notes
//
// The answer must be exactly {"decision": D, "reason": R}: D one of the
// five decision words, R a string or absent. Any other member is an error
// too, so that a misspelt "reason" is found at once instead of silently
// dropped.
func (p *WASMPermission) DecidePermission(ctx context.Context, req *PermissionRequest) (Verdict, error) {
	failed := Verdict{Rule: p.name}
	if req == nil {
		req = &PermissionRequest{}
	}
	in := *req
	in.Kind = KindPermission
	in.Config = p.config
	if in.Options == nil {
		in.Options = []Option{}
	}
	if in.Tool.Locations == nil {
		in.Tool.Locations = []ToolLocation{}
	}
	request, err := marshalRequest(&in)
	if err != nil {
		return failed, fmt.Errorf("policy module %s: request: %w", p.module.Path(), err)
	}
	answer, stderr, err := p.module.Call(ctx, KindPermission, request)
	failed.Stderr = stderr
	if err != nil {
		return failed, err
	}
	var a struct {
		Decision *string `json:"decision"`
		Reason   string  `json:"reason"`
	}
	if err := decodeAnswer(answer, &a); err != nil {
		return failed, fmt.Errorf("policy module %s: %w", p.module.Path(), err)
	}
	if a.Decision == nil {
		return failed, fmt.Errorf("policy module %s: answer has no \"decision\": %s", p.module.Path(), excerpt(answer))
	}
	d, err := ParseDecision(*a.Decision)
	if err != nil {
		return failed, fmt.Errorf("policy module %s: answer: %w", p.module.Path(), err)
	}
	return Verdict{Decision: d, Rule: p.name, Reason: a.Reason, Stderr: stderr}, nil
}

// WASMEnv is an env policy decided by a WASM module (SPEC §4.2): it sends
// the EnvRequest with "proposed", the environment Base would give, and
// reads {"env": {...}} (the child's whole environment) or {"deny": "..."}.
type WASMEnv struct {
	// Base computes "proposed"; NewWASMEnv sets DefaultEnv(). Set it to
	// the EnvRules built from the workflow's inherit and scrub settings.
	Base Env

	module *wasm.Module
	name   string
	config map[string]any
}

var _ Env = (*WASMEnv)(nil)

// NewWASMEnv makes an env policy of m, proposing DefaultEnv's environment.
// name and config are as for NewWASMPermission.
func NewWASMEnv(m *wasm.Module, name string, config map[string]any) *WASMEnv {
	return &WASMEnv{Base: DefaultEnv(), module: m, name: ruleName(m, name), config: configOrEmpty(config)}
}

// wasmEnvRequest is the env request on the wire; config is last, after
// the request's own fields.
type wasmEnvRequest struct {
	EnvRequest
	Proposed map[string]string `json:"proposed"`
	Config   map[string]any    `json:"config"`
}

// DecideEnv asks the module for the child's environment.
//
// # Notes
//
// The answer must have exactly one of "env" (an object whose values are
// all strings, and whose names are non-empty and contain neither "=" nor
// NUL, so the environment can be spawned as given) and "deny" (a non-empty
// string). Anything else is an error, and the caller refuses the spawn. If
// Base itself denies, its decision stands and the module is not asked.
func (e *WASMEnv) DecideEnv(ctx context.Context, req *EnvRequest) (EnvDecision, error) {
	failed := EnvDecision{Rule: e.name}
	if req == nil {
		req = &EnvRequest{}
	}
	base := e.Base
	if base == nil {
		base = DefaultEnv()
	}
	proposed, err := base.DecideEnv(ctx, req)
	if err != nil {
		return failed, fmt.Errorf("policy module %s: proposing the environment: %w", e.module.Path(), err)
	}
	if proposed.Deny != "" {
		return proposed, nil
	}
	in := wasmEnvRequest{EnvRequest: *req, Proposed: nonNil(proposed.Env), Config: e.config}
	in.Kind = KindEnv
	in.Ambient, in.Explicit = nonNil(in.Ambient), nonNil(in.Explicit)
	request, err := marshalRequest(&in)
	if err != nil {
		return failed, fmt.Errorf("policy module %s: request: %w", e.module.Path(), err)
	}
	answer, stderr, err := e.module.Call(ctx, KindEnv, request)
	failed.Stderr = stderr
	if err != nil {
		return failed, err
	}
	var a struct {
		Env  *map[string]string `json:"env"`
		Deny *string            `json:"deny"`
	}
	if err := decodeAnswer(answer, &a); err != nil {
		return failed, fmt.Errorf("policy module %s: %w", e.module.Path(), err)
	}
	switch {
	case a.Env != nil && a.Deny != nil:
		return failed, fmt.Errorf("policy module %s: answer has both \"env\" and \"deny\"", e.module.Path())
	case a.Deny != nil:
		if *a.Deny == "" {
			return failed, fmt.Errorf("policy module %s: answer denies with an empty reason", e.module.Path())
		}
		return EnvDecision{Deny: *a.Deny, Rule: e.name, Stderr: stderr}, nil
	case a.Env != nil && *a.Env != nil:
		for name, value := range *a.Env {
			if name == "" || strings.ContainsAny(name, "=\x00") || strings.ContainsRune(value, 0) {
				return failed, fmt.Errorf("policy module %s: answer sets %q, which is not a valid environment variable", e.module.Path(), name)
			}
		}
		return EnvDecision{Env: *a.Env, Rule: e.name, Stderr: stderr}, nil
	}
	return failed, fmt.Errorf("policy module %s: answer has neither an \"env\" object nor \"deny\": %s", e.module.Path(), excerpt(answer))
}

// marshalRequest encodes a request without encoding/json's HTML escaping,
// so "make && rm -rf x" reaches the module as written, not as
// "make \u0026\u0026 rm -rf x": a guest that matches bytes (the WAT
// example does) must see the characters the agent sent.
func marshalRequest(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// decodeAnswer decodes a module's answer strictly: unknown members and
// values of the wrong type are errors.
func decodeAnswer(answer []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return fmt.Errorf("answer: %s: a JSON %s where a %s belongs", typeErr.Field, typeErr.Value, typeErr.Type)
		}
		return fmt.Errorf("answer: %w", err)
	}
	return nil
}

// excerpt quotes the start of an answer for an error message.
func excerpt(b []byte) string {
	const n = 120
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func ruleName(m *wasm.Module, name string) string {
	if name == "" {
		return m.Name()
	}
	return name
}

// configOrEmpty makes a missing config {} on the wire, not null, so a guest
// can always index it.
func configOrEmpty(config map[string]any) map[string]any {
	if config == nil {
		return map[string]any{}
	}
	return config
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
