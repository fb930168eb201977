package policies

import (
	"context"
	"fmt"
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

// ParseShorthand reads the shorthand form of a permission policy.
//
// # Notes
//
// Only reject, allow and cancel are accepted. The *_always decisions would
// let one answer grant or refuse a whole class of future calls inside the
// agent, beyond the policy's sight; they are available in rules, where the
// condition says which calls they cover.
func ParseShorthand(s string) (Shorthand, error) {
	switch d := Decision(s); d {
	case Reject, Allow, Cancel:
		return Shorthand{Decision: d}, nil
	}
	return Shorthand{}, fmt.Errorf("permission %q: the shorthand is one of reject, allow or cancel (use rules: for anything finer)", s)
}

// DefaultPermission is the policy used when no permission policy is
// configured: reject everything. An unattended agent must not run commands or
// edit files unless the workflow says it may, and rejecting (rather than
// cancelling, as the seed did) lets the agent carry on with its turn. The caller
// records it with SourceDefault.
func DefaultPermission() Shorthand {
	return Shorthand{Decision: Reject}
}
