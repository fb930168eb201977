package cli

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/steps"
)

// Bounds of what the views print of an agent's words (a kind, a title),
// in bytes; each cut says so.
const (
	idMax      = 200
	kindMax    = 40
	titleMax   = 300
	commandMax = 2000
	reasonMax  = 1000
)

// UsageText words a usage for a person: "1,305 tokens, 0.00018 USD".
// What the agent did not report is "unknown", never 0: "tokens unknown,
// 0.00018 USD", or "unknown" when it reported nothing. Every number is
// bounded (engine.Thousands, engine.FormatCost): no record widens a line
// past a few characters.
func UsageText(u *steps.Usage) string {
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

// RunUsageText words a run's sums, saying how many steps reported no
// tokens: "1,305 tokens (1 step unknown)".
func RunUsageText(u *engine.RunUsage) string {
	if u == nil {
		return "unknown"
	}
	s := UsageText(&u.Usage)
	if u.UnreportedSteps > 0 {
		if _, ok := u.Tokens(); ok {
			s += fmt.Sprintf(" (+%d step(s) unknown)", u.UnreportedSteps)
		}
	}
	return s
}

// DurationText words a duration recorded in milliseconds: "1.234s". One
// past what a time.Duration holds (292 years: only a damaged record has
// one) is shown as that bound, a negative one as "-".
func DurationText(ms int64) string {
	const maxMS = math.MaxInt64 / int64(time.Millisecond)
	if ms < 0 {
		return "-"
	}
	return (time.Duration(min(ms, maxMS)) * time.Millisecond).String()
}

// IndentLines sanitises s first, so that a carriage return turned newline is
// indented like any other line.
func IndentLines(s, prefix string) string {
	return strings.ReplaceAll(termtext.Sanitize(s), "\n", "\n"+prefix)
}
