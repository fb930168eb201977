package policies

import (
	"context"
	"fmt"
	"time"
)

// Shorthand is the one-word permission policy (`permission: reject`): it
// gives the same decision to every request.
type Shorthand struct {
	Decision Decision
}

var _ Permission = Shorthand{}

// DecidePermission answers s.Decision, recorded under the rule "shorthand".
func (s Shorthand) DecidePermission(context.Context, *PermissionRequest) (Verdict, error) {
	return Verdict{Decision: s.Decision, Rule: "shorthand"}, nil
}

// ParseShorthand reads the shorthand form of a permission policy: any of
// the six decisions (`ask` falls back to reject: the mapping form's
// ask-fallback sets another).
//
// # Notes
//
// allow_always and reject_always are accepted because a workflow may mean
// them (docs/policies.md#permission-policies); they make the agent remember the answer and stop
// asking, which is why `allow` never selects an allow_always option on its
// own (see SelectOption).
func ParseShorthand(s string) (Shorthand, error) {
	d, err := ParseDecision(s)
	if err != nil {
		return Shorthand{}, fmt.Errorf("permission %q: the shorthand is one of allow, allow_always, reject, reject_always, cancel or ask (use rules: for anything finer)", s)
	}
	return Shorthand{Decision: d}, nil
}

// DefaultPermission is the policy used when no permission policy is
// configured: reject everything. An unattended agent must not run commands or
// edit files unless the workflow says it may, and rejecting (rather than
// cancelling, as the seed did) lets the agent carry on with its turn. The caller
// records it with SourceDefault.
func DefaultPermission() Shorthand {
	return Shorthand{Decision: Reject}
}

// AskFallback is a permission policy with its ask-fallback: the decision
// that answers its ask when no one can be asked (docs/policies.md#ask).
type AskFallback struct {
	Permission
	Fallback Decision
}

// DecidePermission asks the policy, and gives an ask its fallback.
func (a *AskFallback) DecidePermission(ctx context.Context, req *PermissionRequest) (Verdict, error) {
	v, err := a.Permission.DecidePermission(ctx, req)
	if v.Decision == Ask {
		v.Fallback = a.Fallback
	}
	return v, err
}

// AskTimeout is a permission policy with its ask-timeout: how long its ask
// waits for an answer before the ask-fallback decides
// (docs/policies.md#approvals).
type AskTimeout struct {
	Permission
	Timeout time.Duration
}

// DecidePermission asks the policy, and gives an ask its timeout.
func (a *AskTimeout) DecidePermission(ctx context.Context, req *PermissionRequest) (Verdict, error) {
	v, err := a.Permission.DecidePermission(ctx, req)
	if v.Decision == Ask {
		v.Timeout = a.Timeout
	}
	return v, err
}
