package main

import (
	"fmt"
	"strings"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/steps"
)

// usageText words a usage for a person: "1,305 tokens, 0.00018 USD".
// What the agent did not report is "unknown", never 0: "tokens unknown,
// 0.00018 USD", or "unknown" when it reported nothing. Every number is
// bounded (engine.Thousands, engine.FormatCost): no record widens a line
// past a few characters.
func usageText(u *steps.Usage) string {
	if u.Empty() {
		return "unknown"
	}
	var parts []string
	if n, ok := u.Tokens(); ok {
		parts = append(parts, engine.Thousands(n)+" tokens")
	} else {
		parts = append(parts, "tokens unknown")
	}
	if u.Cost != nil {
		c := *u.Cost
		// acpflow takes only a code from an agent; a record written
		// before it checked may hold anything.
		c.Currency = termtext.Line(c.Currency, 16)
		parts = append(parts, engine.FormatCost(c))
	}
	return strings.Join(parts, ", ")
}

// usageDetail is usageText with the token counts that make up the total
// and the context the agent last reported: what `show` prints.
func usageDetail(u *steps.Usage) string {
	s := usageText(u)
	if u.Empty() {
		return s
	}
	var parts []string
	add := func(name string, v *int64) {
		if v != nil {
			parts = append(parts, name+" "+engine.Thousands(*v))
		}
	}
	add("in", u.InputTokens)
	add("out", u.OutputTokens)
	add("thought", u.ThoughtTokens)
	add("cache read", u.CachedReadTokens)
	add("cache write", u.CachedWriteTokens)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	if u.ContextTokens != nil {
		s += fmt.Sprintf("; context %s", engine.Thousands(*u.ContextTokens))
		if u.ContextSize != nil && *u.ContextSize > 0 {
			s += " of " + engine.Thousands(*u.ContextSize)
		}
	}
	return s
}

// runUsageText words a run's sums, saying how many steps reported no
// tokens: "1,305 tokens (1 step unknown)".
func runUsageText(u *engine.RunUsage) string {
	if u == nil {
		return "unknown"
	}
	s := usageText(&u.Usage)
	if u.UnreportedSteps > 0 {
		if _, ok := u.Tokens(); ok {
			s += fmt.Sprintf(" (+%d step(s) unknown)", u.UnreportedSteps)
		}
	}
	return s
}
