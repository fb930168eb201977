package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/cli/words"
	"github.com/acpflow/acpflow/engine"
	"github.com/acpflow/acpflow/steps"
)

// usageDetail is words.Usage with the token counts that make up the total
// and the context the agent last reported: what `show` prints.
func usageDetail(u *steps.Usage) string {
	s := words.Usage(u)
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
	if u.Source == steps.SourceGateway {
		s += ", metered by the gateway" + modelsText(u)
	}
	if u.ContextTokens != nil {
		s += fmt.Sprintf("; context %s", engine.Thousands(*u.ContextTokens))
		if u.ContextSize != nil && *u.ContextSize > 0 {
			s += " of " + engine.Thousands(*u.ContextSize)
		}
	}
	return s
}

// modelsText names the models a gateway metered, with their tokens, when
// there were several: ": claude-sonnet-4-5 1,200, claude-haiku-4-5 300".
func modelsText(u *steps.Usage) string {
	if len(u.Models) < 2 {
		if len(u.Models) == 1 {
			return " (" + slices.Collect(maps.Keys(u.Models))[0] + ")"
		}
		return ""
	}
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(u.Models)) {
		name := m
		if name == "" {
			name = "unnamed model"
		}
		parts = append(parts, name+" "+engine.Thousands(u.Models[m].Tokens()))
	}
	return ": " + strings.Join(parts, ", ")
}
