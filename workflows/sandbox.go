package workflows

import (
	"errors"

	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/steps/confine"
)

// sandbox reads a `sandbox:` value (an agent's, whose context is what, or
// the workflow's, what ""): true, false or a mapping (confine.Parse).
func (d *decoder) sandbox(n *node, what string) *steps.Sandbox {
	sb, err := confine.Parse(n.plain())
	if err != nil {
		at := n
		var fe *steps.FieldError
		if errors.As(err, &fe) && len(fe.Path) > 0 {
			if k := n.get(fe.Path[0]); k != nil {
				at = k
			}
		}
		msg := errors.Unwrap(err).Error()
		if what != "" {
			msg = what + ": " + msg
		}
		d.at(at.pos, "%s", msg)
		return nil
	}
	return sb
}
