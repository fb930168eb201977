// Package wasmpolicy is the `wasm:` form of a policy (docs: the WASM ABI):
// a permission or env policy decided by a WebAssembly module run by
// package wasm. It registers the form with policies from its init
// function, declaring its key (Key) and that it takes limits:, as a step
// kind registers with steps, so a program has the form by importing this
// package for its side effect (every acpflow binary does, through package
// standard) and links no WASM runtime otherwise. No other package names
// the form.
package wasmpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/wasm"
)

// Key is the form's key in a policy's mapping: `wasm: PATH.wasm`.
const Key = "wasm"

func init() {
	policies.RegisterForm(policies.FormInfo{
		Key: Key, Label: "WASM", Keys: []string{"limits"},
		Description: "A WASM policy module (ABI v1), relative to the workflow file.",
		Schema:      json.RawMessage(formSchema),
	}, SharedForm())
}

// formSchema is the JSON schema of the form's keys, for editors.
const formSchema = `{
  "wasm": {"description": "A WASM policy module (ABI v1), relative to the workflow file.", "type": "string", "minLength": 1},
  "limits": {
    "description": "Caps for a WASM module: memory (bytes, or a size such as 64MiB; default 32MiB) and timeout per call (default 1s).",
    "type": "object",
    "additionalProperties": false,
    "properties": {"memory": {"type": ["string", "integer"]}, "timeout": {"type": ["string", "integer"]}}
  }
}`

// SharedForm loads modules into one wasm.Host per process, created on
// first use: compiling a module is what costs (a Go module takes a second
// and a half), so every workflow and policy file a process loads shares the
// host's cache of compiled modules. It is the form this package registers.
func SharedForm() policies.Form { return sharedForm{} }

type sharedForm struct{}

var shared struct {
	once sync.Once
	host *wasm.Host
	err  error
}

func (sharedForm) form() (*Form, error) {
	shared.once.Do(func() { shared.host, shared.err = wasm.NewHost(context.Background()) })
	if shared.err != nil {
		return nil, fmt.Errorf("start the WASM host: %w", shared.err)
	}
	return NewForm(context.Background(), shared.host), nil
}

// Permission implements policies.Form.
func (s sharedForm) Permission(spec policies.FormSpec) (policies.Permission, error) {
	f, err := s.form()
	if err != nil {
		return nil, err
	}
	return f.Permission(spec)
}

// Env implements policies.Form.
func (s sharedForm) Env(spec policies.FormSpec) (policies.Env, error) {
	f, err := s.form()
	if err != nil {
		return nil, err
	}
	return f.Env(spec)
}

// Form is the `wasm:` form on one host: it loads the module with the host,
// under the file's limits, and makes a Permission, or an Env (proposing
// policies.DefaultEnv's environment: the wasm form replaces inherit and
// scrub-credentials).
type Form struct {
	ctx  context.Context
	host *wasm.Host
}

var _ policies.Form = (*Form)(nil)

// NewForm returns the form on host; ctx bounds the loads, which compile.
func NewForm(ctx context.Context, host *wasm.Host) *Form { return &Form{ctx: ctx, host: host} }

func (f *Form) load(spec policies.FormSpec) (*wasm.Module, error) {
	return f.host.Load(f.ctx, spec.Path, wasm.Limits{Memory: spec.Limits.Memory, Timeout: spec.Limits.Timeout})
}

// Permission implements policies.Form.
func (f *Form) Permission(spec policies.FormSpec) (policies.Permission, error) {
	m, err := f.load(spec)
	if err != nil {
		return nil, err
	}
	return NewPermission(m, "", spec.Config), nil
}

// Env implements policies.Form.
func (f *Form) Env(spec policies.FormSpec) (policies.Env, error) {
	m, err := f.load(spec)
	if err != nil {
		return nil, err
	}
	return NewEnv(m, "", spec.Config), nil
}

// Permission is a permission policy decided by a WASM module (docs/wasm.md):
// it sends the PermissionRequest, with the policy's config, and reads
// {"decision": "...", "reason": "..."}.
type Permission struct {
	module *wasm.Module
	name   string
	config map[string]any
}

var _ policies.Permission = (*Permission)(nil)

// NewPermission makes a permission policy of m. name is recorded as the
// rule of every verdict ("" means the module's file name, as docs/results.md
// records it); config is sent as the request's "config".
func NewPermission(m *wasm.Module, name string, config map[string]any) *Permission {
	return &Permission{module: m, name: ruleName(m, name), config: configOrEmpty(config)}
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
// dropped, and so is a member given twice or in another case
// ({"decision":"reject","Decision":"allow"}), which JSON decoders read
// differently: one takes the first, encoding/json the last.
func (p *Permission) DecidePermission(ctx context.Context, req *policies.PermissionRequest) (policies.Verdict, error) {
	failed := policies.Verdict{Rule: p.name}
	if req == nil {
		req = &policies.PermissionRequest{}
	}
	in := *req
	in.Kind = policies.KindPermission
	in.Config = p.config
	if in.Options == nil {
		in.Options = []policies.Option{}
	}
	if in.Tool.Locations == nil {
		in.Tool.Locations = []policies.ToolLocation{}
	}
	request, err := wasm.EncodeJSON(&in)
	if err != nil {
		return failed, fmt.Errorf("policy module %s: request: %w", p.module.Path(), err)
	}
	answer, stderr, err := p.module.Call(ctx, policies.KindPermission, request)
	failed.Stderr = stderr
	if err != nil {
		return failed, err
	}
	d, reason, err := decodePermissionAnswer(answer)
	if err != nil {
		return failed, fmt.Errorf("policy module %s: %w", p.module.Path(), err)
	}
	return policies.Verdict{Decision: d, Rule: p.name, Reason: reason, Stderr: stderr}, nil
}

// Env is an env policy decided by a WASM module (docs/policies.md#env-policies): it sends
// the EnvRequest with "proposed", the environment Base would give, and
// reads {"env": {...}} (the child's whole environment) or {"deny": "..."}.
type Env struct {
	// Base computes "proposed"; NewEnv sets policies.DefaultEnv(). Set it
	// to the EnvRules built from the workflow's inherit and scrub settings.
	Base policies.Env

	module *wasm.Module
	name   string
	config map[string]any
}

var _ policies.Env = (*Env)(nil)

// NewEnv makes an env policy of m, proposing policies.DefaultEnv's
// environment. name and config are as for NewPermission.
func NewEnv(m *wasm.Module, name string, config map[string]any) *Env {
	return &Env{Base: policies.DefaultEnv(), module: m, name: ruleName(m, name), config: configOrEmpty(config)}
}

// wasmEnvRequest is the env request on the wire; config is last, after
// the request's own fields.
type wasmEnvRequest struct {
	policies.EnvRequest
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
// string). Anything else is an error, and the caller refuses the spawn: a
// member given twice or in another case, a name set twice in "env". If
// Base itself denies, its decision stands and the module is not asked.
//
// The module sees every ambient value, credentials included, so what it
// says is scrubbed before it is returned: its stderr, its errors and its
// reason to deny carry no value that the built-in rules drop, and no value
// of a variable with a credential's name (secretScrubber).
func (e *Env) DecideEnv(ctx context.Context, req *policies.EnvRequest) (policies.EnvDecision, error) {
	failed := policies.EnvDecision{Rule: e.name}
	if req == nil {
		req = &policies.EnvRequest{}
	}
	base := e.Base
	if base == nil {
		base = policies.DefaultEnv()
	}
	proposed, err := base.DecideEnv(ctx, req)
	if err != nil {
		return failed, fmt.Errorf("policy module %s: proposing the environment: %w", e.module.Path(), err)
	}
	if proposed.Deny != "" {
		return proposed, nil
	}
	in := wasmEnvRequest{EnvRequest: *req, Proposed: nonNil(proposed.Env), Config: e.config}
	in.Kind = policies.KindEnv
	in.Ambient, in.Explicit = nonNil(in.Ambient), nonNil(in.Explicit)
	request, err := wasm.EncodeJSON(&in)
	if err != nil {
		return failed, fmt.Errorf("policy module %s: request: %w", e.module.Path(), err)
	}
	answer, stderr, err := e.module.Call(ctx, policies.KindEnv, request)
	scrub := secretScrubber(req, proposed.Env)
	failed.Stderr = scrub.Replace(stderr)
	if err != nil {
		return failed, scrubbedError{scrub.Replace(err.Error()), err}
	}
	env, deny, err := decodeEnvAnswer(answer)
	switch {
	case err != nil:
		return failed, scrubbedError{scrub.Replace(fmt.Sprintf("policy module %s: %s", e.module.Path(), err)), err}
	case deny != "":
		return policies.EnvDecision{Deny: scrub.Replace(deny), Rule: e.name, Stderr: failed.Stderr}, nil
	}
	return policies.EnvDecision{Env: env, Rule: e.name, Stderr: failed.Stderr}, nil
}

// secretScrubber replaces, in what an env module says (its stderr, its
// errors and its reason to deny), every value that must not be recorded:
// an ambient value that the built-in rules would not pass as it is (the
// credential rule, ACPFLOW_*, inherit, the user's drop rules), and every
// value, ambient or explicit, of a variable with a credential's name even
// where a rule keeps it. The module is sent all of them; what it writes
// goes to the terminal, the run store, --output and --json. A value is
// replaced by "[value of NAME]", as written and as JSON or Go quoting
// escapes it (a module echoing its request shows values JSON-escaped; an
// error quotes an answer with %q). Values shorter than 4 bytes are left
// alone: none is a secret worth the name, and replacing every "1" would
// make stderr unreadable.
func secretScrubber(req *policies.EnvRequest, proposed map[string]string) *strings.Replacer {
	secret := map[string]string{} // value, or an escaped form of it → name
	add := func(name, value string) {
		if len(value) < 4 {
			return
		}
		jsonForm, _ := wasm.EncodeJSON(value)
		jsonInner := string(jsonForm[1 : len(jsonForm)-1])
		goInner := func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] }
		for _, form := range []string{value, jsonInner, goInner(value), goInner(jsonInner)} {
			if other, ok := secret[form]; !ok || name < other {
				secret[form] = name
			}
		}
	}
	for name, value := range req.Ambient {
		if passed, ok := proposed[name]; !ok || passed != value || policies.IsCredential(name) {
			add(name, value)
		}
	}
	for name, value := range req.Explicit {
		if policies.IsCredential(name) {
			add(name, value)
		}
	}
	values := make([]string, 0, len(secret))
	for v := range secret {
		values = append(values, v)
	}
	// Longest first: a value that contains another is replaced whole.
	sort.Slice(values, func(i, j int) bool {
		if len(values[i]) != len(values[j]) {
			return len(values[i]) > len(values[j])
		}
		return values[i] < values[j]
	})
	pairs := make([]string, 0, 2*len(values))
	for _, v := range values {
		pairs = append(pairs, v, "[value of "+secret[v]+"]")
	}
	return strings.NewReplacer(pairs...)
}

// scrubbedError is an env module's error with secret values replaced. It
// does not unwrap, so no caller can print the original by accident; it
// still answers errors.Is for a cancelled or timed-out call.
type scrubbedError struct {
	msg   string
	cause error
}

func (e scrubbedError) Error() string { return e.msg }

func (e scrubbedError) Is(target error) bool {
	return (target == context.Canceled || target == context.DeadlineExceeded) && errors.Is(e.cause, target)
}

// decodePermissionAnswer reads {"decision": D, "reason": R} strictly (see
// DecidePermission).
func decodePermissionAnswer(answer []byte) (policies.Decision, string, error) {
	members, err := answerMembers(answer, "decision", "reason")
	if err != nil {
		return "", "", err
	}
	decision, ok, err := stringMember(members, "decision")
	switch {
	case err != nil:
		return "", "", err
	case !ok:
		return "", "", fmt.Errorf("answer has no \"decision\": %s", excerpt(answer))
	}
	d, err := policies.ParseDecision(decision)
	if err != nil {
		return "", "", fmt.Errorf("answer: %w", err)
	}
	reason, _, err := stringMember(members, "reason")
	if err != nil {
		return "", "", err
	}
	return d, reason, nil
}

// decodeEnvAnswer reads {"env": {...}} or {"deny": "..."} strictly (see
// DecideEnv). A name set twice in "env" is an error too.
func decodeEnvAnswer(answer []byte) (env map[string]string, deny string, err error) {
	members, err := answerMembers(answer, "env", "deny")
	if err != nil {
		return nil, "", err
	}
	deny, hasDeny, err := stringMember(members, "deny")
	if err != nil {
		return nil, "", err
	}
	raw, hasEnv := members["env"]
	hasEnv = hasEnv && !isNull(raw)
	switch {
	case hasEnv && hasDeny:
		return nil, "", errors.New("answer has both \"env\" and \"deny\"")
	case hasDeny && deny == "":
		return nil, "", errors.New("answer denies with an empty reason")
	case hasDeny:
		return nil, deny, nil
	case !hasEnv:
		return nil, "", fmt.Errorf("answer has neither an \"env\" object nor \"deny\": %s", excerpt(answer))
	}
	if env, err = envMember(raw); err != nil {
		return nil, "", err
	}
	return env, "", nil
}

// answerMembers reads a module's answer, one JSON object, into its
// members. A member not in known is an error (one in another case is
// named as such), and so is a member given twice, however spelt ("\u0064"
// is "d"): decoders disagree on which of two to believe, so neither is.
func answerMembers(answer []byte, known ...string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(answer))
	members := map[string]json.RawMessage{}
	err := objectMembers(dec, "answer", func(name string) error {
		if _, dup := members[name]; dup {
			return fmt.Errorf("answer has %q twice", name)
		}
		if !slices.Contains(known, name) {
			for _, k := range known {
				if strings.EqualFold(k, name) {
					return fmt.Errorf("answer has %q, not %q: member names are case-sensitive", name, k)
				}
			}
			return fmt.Errorf("answer has an unknown member %q; want %s", name, strings.Join(known, " or "))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("answer: %s: %w", name, err)
		}
		members[name] = raw
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("answer has more after its object")
	}
	return members, nil
}

// objectMembers reads one JSON object from dec, calling member with each
// member's name; member must read the value.
func objectMembers(dec *json.Decoder, what string, member func(name string) error) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("%s is not a JSON object", what)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		name, _ := tok.(string)
		if err := member(name); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// stringMember is the string member name: absent or null is ok false,
// anything but a string an error.
func stringMember(members map[string]json.RawMessage, name string) (string, bool, error) {
	raw, ok := members[name]
	if !ok || isNull(raw) {
		return "", false, nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false, fmt.Errorf("answer: %s: a JSON %s where a string belongs", name, jsonKind(raw))
	}
	return s, true, nil
}

// envMember reads the "env" object: string values, each name once.
func envMember(raw json.RawMessage) (map[string]string, error) {
	if raw[0] != '{' {
		return nil, fmt.Errorf("answer: env: a JSON %s where an object belongs", jsonKind(raw))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	env := map[string]string{}
	err := objectMembers(dec, "answer: env", func(name string) error {
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return fmt.Errorf("answer: env: %w", err)
		}
		if _, dup := env[name]; dup {
			return fmt.Errorf("answer sets %q twice", name)
		}
		var s string
		if value[0] != '"' || json.Unmarshal(value, &s) != nil {
			return fmt.Errorf("answer: env: %q is a JSON %s where a string belongs", name, jsonKind(value))
		}
		if name == "" || strings.ContainsAny(name, "=\x00") || strings.ContainsRune(s, 0) {
			return fmt.Errorf("answer sets %q, which is not a valid environment variable", name)
		}
		env[name] = s
		return nil
	})
	return env, err
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// jsonKind names the kind of a JSON value for an error message.
func jsonKind(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
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
