package workflows

import (
	"fmt"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/policies"
)

var (
	policyKeys     = []string{"permission", "env"}
	permissionKeys = []string{"rules", "default", "wasm", "config"}
	envKeys        = []string{"inherit", "scrub-credentials", "rules", "wasm"}
	inheritValues  = []string{policies.InheritAll, policies.InheritCore, policies.InheritNone}
)

// decodePolicies reads a `policies:` block, at the top of the file or on a
// step (SPEC §4); a kind it does not set stays nil.
func (d *decoder) decodePolicies(n *node, ctx string) engine.Policies {
	var p engine.Policies
	f := d.fields(n, ctx, policyKeys)
	if f == nil {
		return p
	}
	if x := f["permission"]; x != nil {
		perm, err := d.decodePermission(x)
		d.merge(err)
		p.Permission = perm
	}
	if x := f["env"]; x != nil {
		env, err := d.decodeEnv(x)
		d.merge(err)
		p.Env = env
	}
	return p
}

// decodePermission reads one permission policy: the shorthand (reject,
// allow, cancel) or a mapping. It is the one place each form is decoded, so
// the rules and WASM forms plug in here. The error, if any, is an Errors
// with positions.
func (d *decoder) decodePermission(n *node) (policies.Permission, error) {
	sub := d.child()
	switch {
	case n.kind == mappingNode:
		if sub.fields(n, "permission", permissionKeys) != nil {
			sub.at(n.pos, "permission as a mapping (rules:, wasm:) is not supported yet; use the shorthand reject, allow or cancel")
		}
		return nil, sub.result()
	case n.kind == scalarNode:
		s, ok := n.str()
		if !ok {
			break
		}
		sh, err := policies.ParseShorthand(s)
		if err != nil {
			msg := err.Error()
			if s := suggest(s, []string{"reject", "allow", "cancel"}); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			sub.at(n.pos, "%s", msg)
			return nil, sub.result()
		}
		return sh, nil
	}
	sub.wrong(n, "permission: want reject, allow, cancel or a mapping with rules: or wasm:, got %s", n.describe())
	return nil, sub.result()
}

// decodeEnv reads one env policy (SPEC §4.2). It is the one place each form
// is decoded, so the rules and WASM forms plug in here. Credentials are
// scrubbed unless the file says otherwise.
func (d *decoder) decodeEnv(n *node) (policies.Env, error) {
	sub := d.child()
	f := sub.fields(n, "env", envKeys)
	if f == nil {
		return nil, sub.result()
	}
	e := &policies.EnvRules{Inherit: policies.InheritAll, ScrubCredentials: true}
	if x := f["inherit"]; x != nil {
		if s, ok := sub.str(x, "env: inherit"); ok {
			if contains(inheritValues, s) {
				e.Inherit = s
			} else {
				sub.at(x.pos, "env: inherit %q: want all, core or none%s", s, didYouMean(s, inheritValues))
			}
		}
	}
	if x := f["scrub-credentials"]; x != nil {
		e.ScrubCredentials, _ = sub.boolean(x, "env: scrub-credentials")
	}
	for _, k := range []string{"rules", "wasm"} {
		if f[k] != nil {
			sub.at(f[k].pos, "env: %s is not supported yet; use inherit and scrub-credentials", k)
		}
	}
	if err := sub.result(); err != nil {
		return nil, err
	}
	return e, nil
}

// child is a decoder for a part that returns its own errors (the policy
// decoders), sharing the file and the declarations.
func (d *decoder) child() *decoder {
	c := *d
	c.errorList = &errorList{file: d.file, lines: d.lines}
	return &c
}

// merge adds the errors a part returned.
func (d *decoder) merge(err error) {
	if err == nil {
		return
	}
	if es, ok := err.(Errors); ok {
		d.errs = append(d.errs, es...)
		return
	}
	d.errs = append(d.errs, d.make(pos{}, err.Error()))
}
