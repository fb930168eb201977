package policies

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Values of EnvRules.Inherit.
const (
	InheritAll  = "all"  // every ambient variable (the default)
	InheritCore = "core" // only what a program needs to run: PATH, HOME, locale, ...
	InheritNone = "none" // no ambient variable; only explicit values
)

// reservedPrefix marks acpflow's own settings, which are not the child's.
const reservedPrefix = "ACPFLOW_"

// EnvRule decides one ambient variable ahead of Inherit and the credential
// rule. It is the seam for the expr rules of the `env: rules:` form: the
// first rule that matches decides.
type EnvRule interface {
	// Match reports whether the rule applies to the variable (matched) and,
	// if so, whether the child gets it (keep). An error fails the whole
	// decision closed: the spawn is refused.
	Match(name, value string, req *EnvRequest) (keep bool, matched bool, err error)
}

// EnvRules is the built-in env policy (docs/policies.md#env-policies). Build the default with
// DefaultEnv; the zero value inherits everything and scrubs nothing.
//
// For each ambient variable, in order: a name starting with ACPFLOW_ is
// dropped; else the first matching rule of Rules decides; else Inherit and
// then, when ScrubCredentials is set, IsCredential decide. The explicit
// values are then set on top and always win, ACPFLOW_* ones included.
type EnvRules struct {
	Inherit          string    // InheritAll ("" means the same), InheritCore or InheritNone
	ScrubCredentials bool      // drop ambient variables that IsCredential names
	Rules            []EnvRule // per-variable rules, first match wins
}

var _ Env = (*EnvRules)(nil)

// DefaultEnv is the env policy used when none is configured: inherit every
// ambient variable except credentials, as the seed did but with the wider
// credential rule.
func DefaultEnv() *EnvRules {
	return &EnvRules{Inherit: InheritAll, ScrubCredentials: true}
}

// DecideEnv builds the child's complete environment from req.
//
// # Notes
//
// An unknown Inherit value or a failing rule is an error rather than a
// guess, so the caller refuses the spawn (fail closed). Deny is never set:
// the built-in form only filters, it does not refuse.
func (e *EnvRules) DecideEnv(_ context.Context, req *EnvRequest) (EnvDecision, error) {
	inherit := e.Inherit
	if inherit == "" {
		inherit = InheritAll
	}
	if inherit != InheritAll && inherit != InheritCore && inherit != InheritNone {
		return EnvDecision{}, fmt.Errorf("env inherit %q: want all, core or none", e.Inherit)
	}
	env := make(map[string]string, len(req.Ambient)+len(req.Explicit))
	for name, value := range req.Ambient {
		keep, err := e.keepAmbient(inherit, name, value, req)
		if err != nil {
			return EnvDecision{}, fmt.Errorf("env rule on %s: %w", name, err)
		}
		if keep {
			env[name] = value
		}
	}
	maps.Copy(env, req.Explicit)
	return EnvDecision{Env: env, Rule: e.describe(inherit)}, nil
}

// keepAmbient decides one ambient variable.
func (e *EnvRules) keepAmbient(inherit, name, value string, req *EnvRequest) (bool, error) {
	if strings.HasPrefix(name, reservedPrefix) {
		return false, nil
	}
	for _, r := range e.Rules {
		keep, matched, err := r.Match(name, value, req)
		if err != nil {
			return false, err
		}
		if matched {
			return keep, nil
		}
	}
	switch inherit {
	case InheritNone:
		return false, nil
	case InheritCore:
		if !isCoreVar(name) {
			return false, nil
		}
	}
	return !e.ScrubCredentials || !IsCredential(name), nil
}

// describe names the configuration that decided, for the record.
func (e *EnvRules) describe(inherit string) string {
	var parts []string
	if len(e.Rules) > 0 {
		parts = append(parts, fmt.Sprintf("rules(%d)", len(e.Rules)))
	}
	parts = append(parts, "inherit="+inherit)
	if e.ScrubCredentials {
		parts = append(parts, "scrub-credentials")
	}
	return strings.Join(parts, ",")
}

// isCoreVar reports whether name is in the `inherit: core` set: what a
// program needs to find its tools, its home, its locale and its terminal.
func isCoreVar(name string) bool {
	switch name {
	case "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TMPDIR", "TZ":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// EnvList turns an environment into the sorted "NAME=value" list that
// exec.Cmd.Env takes. Sorting makes the child's environment, and anything
// recorded from it, reproducible.
func EnvList(m map[string]string) []string {
	list := make([]string, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		list = append(list, name+"="+m[name])
	}
	return list
}

// EnvMap turns a "NAME=value" list, as os.Environ returns it, into a map.
//
// # Notes
//
// The name ends at the first "=" after the first character, so Windows'
// per-drive entries ("=C:=C:\dir") keep their names. Entries without "=" are
// skipped. A later duplicate wins, as it does for exec.Cmd.
func EnvMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if len(kv) == 0 {
			continue
		}
		i := strings.IndexByte(kv[1:], '=')
		if i < 0 {
			continue
		}
		m[kv[:i+1]] = kv[i+2:]
	}
	return m
}
