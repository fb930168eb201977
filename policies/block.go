package policies

import "slices"

// BlockKeys are the keys of a `policies:` block (docs/policies.md): the
// two policies, and the settings of the permission written beside it.
var BlockKeys = []string{"permission", "env", "ask-fallback", "ask-timeout", "unasked"}

// Block is what one `policies:` block sets; a nil field is not set.
type Block struct {
	Permission Permission
	Env        Env
}

// blockSettings are the settings written beside permission: that wrap it
// (each may also be written inside the permission's mapping; one place
// only), in the order they are read.
var blockSettings = []struct {
	key  string
	read func(p *specParser, path string, perm Permission, v any) Permission
}{
	{"ask-fallback", (*specParser).askFallback},
	{"ask-timeout", (*specParser).askTimeout},
	{"unasked", (*specParser).unasked},
}

// ParseBlock builds the policies of a `policies:` block from its decoded
// YAML mapping, the keys of BlockKeys (the caller reports any other, with
// the block's other keys: an outer policy file's sandbox:, for one).
// baseDir is what a form's file is relative to. broken names keys whose
// values the caller could not read and has reported: they count as
// written, and are not parsed again.
//
// The error, if any, is a SpecErrors whose paths start with the key at
// fault (`permission.rules[2].then`, `ask-fallback`).
func ParseBlock(block map[string]any, baseDir string, broken ...string) (Block, error) {
	var b Block
	p := &specParser{}
	forms := registeredForms()
	parse := func(key string) (any, bool) {
		v, ok := block[key]
		return v, ok && !slices.Contains(broken, key)
	}
	if v, ok := parse("permission"); ok {
		b.Permission = under(p, "permission", func(p *specParser) Permission { return p.permission(v, baseDir, forms) })
	}
	if v, ok := parse("env"); ok {
		b.Env = under(p, "env", func(p *specParser) Env { return p.env(v, baseDir, forms) })
	}
	for _, s := range blockSettings {
		v, ok := parse(s.key)
		_, written := block["permission"]
		switch {
		case !ok:
		case !written:
			p.fail(s.key, "%s goes with the permission: it applies to, in the same policies: block", s.key)
		case b.Permission != nil: // else permission: did not load, and its own errors say why
			b.Permission = s.read(p, s.key, b.Permission, v)
		}
	}
	if len(p.errs) > 0 {
		return b, p.errs
	}
	return b, nil
}

// under runs parse with a parser of its own and adds its mistakes to p's
// under path; the policy is nil when there were any.
func under[P any](p *specParser, path string, parse func(p *specParser) P) P {
	sub := &specParser{}
	policy := parse(sub)
	for _, e := range sub.errs {
		e.Path = joinPath(path, e.Path)
		p.errs = append(p.errs, e)
	}
	if len(sub.errs) > 0 {
		var none P
		return none
	}
	return policy
}
