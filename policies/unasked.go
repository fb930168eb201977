package policies

import (
	"context"
	"strings"

	"github.com/acpflow/acpflow/decisions"
)

// Unasked is what a permission policy says of a tool call that ran
// without asking (docs/policies.md#unasked-tool-calls): an agent in a mode
// that decides alone, a "safe" command list, a reviewer model. The call
// is judged as if it had asked; the mode says whether one the policy would
// not have allowed fails the step.
type Unasked string

const (
	// UnaskedFail cancels the turn and fails the step on a call the policy
	// would not have allowed; one it would have allowed is recorded.
	UnaskedFail Unasked = "fail"
	// UnaskedRecord records every such call and lets the turn go on.
	UnaskedRecord Unasked = "record"
)

// DecisionUnasked is the Decision of the record of a tool call that ran
// without asking; its Would says what the policy decides for it.
const DecisionUnasked = decisions.Unasked

// unaskedWords are the values `unasked:` takes.
var unaskedWords = []string{string(UnaskedFail), string(UnaskedRecord)}

// UnaskedKinds are the tool kinds whose calls must have asked: the ones
// that run a command or change files.
var UnaskedKinds = []string{"execute", "edit", "delete", "move"}

// WithUnasked is a permission policy with its `unasked:` setting.
type WithUnasked struct {
	Permission
	Unasked Unasked
}

// UnaskedOf is p's `unasked:` setting: the one it was given, else
// UnaskedRecord for the shorthand allow and allow_always (the agent may
// do anything anyway), else UnaskedFail.
func UnaskedOf(p Permission) Unasked {
	for inner := p; inner != nil; inner = unwrapSetting(inner) {
		if x, ok := inner.(*WithUnasked); ok {
			return x.Unasked
		}
	}
	if AllowsAll(p) {
		return UnaskedRecord
	}
	return UnaskedFail
}

// unwrapSetting is the policy a setting (ask-fallback:, ask-timeout:, unasked:) wraps,
// nil for a policy that is no setting.
func unwrapSetting(p Permission) Permission {
	switch x := p.(type) {
	case *WithUnasked:
		return x.Permission
	case *AskFallback:
		return x.Permission
	case *AskTimeout:
		return x.Permission
	}
	return nil
}

// AllowsAll reports whether p is the shorthand allow or allow_always: the
// one policy under which an agent may decide alone (no mode guard).
func AllowsAll(p Permission) bool {
	for inner := p; inner != nil; inner = unwrapSetting(inner) {
		p = inner
	}
	s, ok := p.(Shorthand)
	return ok && (s.Decision == Allow || s.Decision == AllowAlways)
}

// Unasked is the `unasked:` setting in force under the outer policy with
// p as the workflow's: fail when any layer that has a permission policy
// says fail, since an outer file's fail cannot be loosened.
func (o Outer) Unasked(p Permission) Unasked {
	for _, l := range o {
		if l.Permission != nil && UnaskedOf(l.Permission) == UnaskedFail {
			return UnaskedFail
		}
	}
	return UnaskedOf(p)
}

// AllowsAll reports whether the outer policy and p, together, let the
// agent decide alone: p is the shorthand allow and every outer file with
// a permission policy is too. An outer file with any other permission
// policy forbids the modes in which an agent decides alone, whatever the
// workflow says.
func (o Outer) AllowsAll(p Permission) bool {
	for _, l := range o {
		if l.Permission != nil && !AllowsAll(l.Permission) {
			return false
		}
	}
	return AllowsAll(p)
}

// JudgeUnasked judges a tool call that ran without a permission request,
// as Outer.Answer would have answered a request for it (no one is asked:
// an ask is its fallback's), and returns its record: Decision
// DecisionUnasked, Would the decision, no outcome or option, and the rule
// and reason that decided. fail reports whether the call must fail the
// step: the setting in force is UnaskedFail and the policy would not have
// allowed it.
func (o Outer) JudgeUnasked(ctx context.Context, p Permission, src Source, req *PermissionRequest) (rec PermissionRecord, fail bool) {
	rec = o.Answer(ctx, p, src, req)
	would := rec.Decision
	rec.Decision, rec.Would, rec.Outcome, rec.OptionID, rec.Ask = DecisionUnasked, would, "", "", ""
	if strings.HasSuffix(rec.Reason, reasonNoOption) {
		// A request with no options has no option to match: that is not
		// what the policy said.
		rec.Reason = strings.TrimSuffix(strings.TrimSuffix(rec.Reason, reasonNoOption), "; ")
	}
	allowed := would == Allow || would == AllowAlways
	return rec, !allowed && o.Unasked(p) == UnaskedFail
}
