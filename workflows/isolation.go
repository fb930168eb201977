package workflows

import (
	"strings"

	"github.com/acpflow/acpflow/engine"
)

// isolationValues are the values `isolation:` takes.
var isolationValues = []string{"worktree"}

// isolation reads `isolation:` with the `base:` and `keep:` beside it in
// the mapping n (the workflow's, ctx "", or a step's, ctx its label): nil
// when n sets none. base: and keep: alone are errors: they say how to
// isolate, and mean nothing without isolation.
func (d *decoder) isolation(n *node, f map[string]*node, ctx string) *engine.Isolation {
	iso := &engine.Isolation{Base: "HEAD", Keep: engine.KeepChanged}
	ok := true
	x := f["isolation"]
	if x == nil {
		for _, k := range []string{"base", "keep"} {
			if f[k] != nil {
				d.at(keyAt(n, k), "%s%s: goes with isolation: worktree (beside it), which this %s does not set", prefix(ctx), k, mappingWord(ctx))
			}
		}
		return nil
	}
	if s, good := d.str(x, prefix(ctx)+"isolation"); !good {
		ok = false
	} else if !contains(isolationValues, s) {
		d.at(x.pos, "%sisolation: unknown value %q%s", prefix(ctx), s, knownList(s, isolationValues))
		ok = false
	}
	if b := f["base"]; b != nil {
		s, good := d.str(b, prefix(ctx)+"base")
		switch {
		case !good:
			ok = false
		case strings.TrimSpace(s) == "":
			d.at(b.pos, "%sbase is empty: give a branch, tag or commit (the default is HEAD)", prefix(ctx))
			ok = false
		case strings.HasPrefix(s, "-") || strings.ContainsAny(s, " \t\n"):
			d.at(b.pos, "%sbase: %q is not a git ref (a branch, tag or commit, such as main)", prefix(ctx), s)
			ok = false
		default:
			iso.Base = s
		}
	}
	if k := f["keep"]; k != nil {
		s, good := d.str(k, prefix(ctx)+"keep")
		switch {
		case !good:
			ok = false
		case !contains(engine.KeepValues, s):
			d.at(k.pos, "%skeep: unknown value %q%s", prefix(ctx), s, knownList(s, engine.KeepValues))
			ok = false
		default:
			iso.Keep = s
		}
	}
	if !ok {
		return nil
	}
	return iso
}

// mappingWord names what ctx is, for messages: the workflow or the step.
func mappingWord(ctx string) string {
	if ctx == "" {
		return "workflow"
	}
	return "step"
}
