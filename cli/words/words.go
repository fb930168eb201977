// Package words says what acpflow records in the words a person reads,
// the same in the terminal views (cli), `acpflow show` and the web UI:
// durations, usages, which policy decided.
//
// # Notes
//
// It is apart from cli so that the web UI uses these words without
// linking cobra and the command line.
package words

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/steps"
)

// Usage words a usage for a person: "1,305 tokens, 0.00018 USD".
// What the agent did not report is "unknown", never 0: "tokens unknown,
// 0.00018 USD", or "unknown" when it reported nothing. Every number is
// bounded (engine.Thousands, engine.FormatCost): no record widens a line
// past a few characters.
func Usage(u *steps.Usage) string {
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

// RunUsage words a run's sums, saying how many steps reported no
// tokens: "1,305 tokens (1 step unknown)".
func RunUsage(u *engine.RunUsage) string {
	if u == nil {
		return "unknown"
	}
	s := Usage(&u.Usage)
	if u.UnreportedSteps > 0 {
		if _, ok := u.Tokens(); ok {
			s += fmt.Sprintf(" (+%d step(s) unknown)", u.UnreportedSteps)
		}
	}
	return s
}

// Duration words a duration recorded in milliseconds: "1.234s". One
// past what a time.Duration holds (292 years: only a damaged record has
// one) is shown as that bound, a negative one as "-".
func Duration(ms int64) string {
	const maxMS = math.MaxInt64 / int64(time.Millisecond)
	if ms < 0 {
		return "-"
	}
	return (time.Duration(min(ms, maxMS)) * time.Millisecond).String()
}

// Policy says which policy made a permission decision: "workflow
// policy" (or step, default), or "outer policy /etc/acpflow/policy.yaml"
// when an outer policy file did.
func Policy(layer policies.Layer, policy policies.Source) string {
	if layer == policies.LayerOuter {
		return "outer policy " + string(policy)
	}
	return string(policy) + " policy"
}
