package whatif

import (
	"fmt"
	"strings"

	"github.com/acpflow/acpflow/policies"
)

// EnvAnswerLabel is a spawn's verdict with the policy and rule that gave it.
func EnvAnswerLabel(a EnvAnswer) string {
	verdict := "spawn"
	if a.Deny != "" {
		verdict = fmt.Sprintf("refuse %q", a.Deny)
	}
	by := string(a.Policy)
	if a.Rule != "" {
		by += " " + a.Rule
	}
	return fmt.Sprintf("%s (%s)", verdict, by)
}

// AnswerLabel is a decision with the rule that made it.
func AnswerLabel(a *Answer) string {
	d := string(a.Decision)
	if d == "" {
		d = "?"
	}
	if a.Outcome == policies.OutcomeCancelled && a.Decision != policies.Cancel {
		d += " (cancelled: no matching option)"
	}
	if a.From == FromResponse {
		return fmt.Sprintf("%s (answered %s; rule not recorded)", d, orCancelled(a.OptionID))
	}
	rule := a.Rule
	if rule != "default" && rule != "shorthand" && !strings.HasSuffix(rule, ".wasm") {
		rule = "rule " + rule
	}
	if a.Layer == policies.LayerOuter {
		return fmt.Sprintf("%s (outer %s %s)", d, a.Policy, rule)
	}
	return fmt.Sprintf("%s (%s %s)", d, a.Policy, rule)
}

func orCancelled(optionID string) string {
	if optionID == "" {
		return "cancelled"
	}
	return optionID
}

// StepLabel names a step attempt: `[i]` for a for-each element, the
// attempt when not the first.
func StepLabel(step string, index *int, attempt int) string {
	if index != nil {
		step += fmt.Sprintf("[%d]", *index)
	}
	if attempt > 1 {
		step += fmt.Sprintf(" (attempt %d)", attempt)
	}
	return step
}
