package agentverify

import (
	"fmt"
	"slices"
	"strings"

	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

// compare names each way r differs from what preset p expects of its
// agent, in words a user can act on.
func compare(p acpagent.Preset, r Report) []string {
	changed := []string{}
	if r.Error != "" {
		return changed // the error says it; nothing was compared
	}
	for _, c := range checks {
		if !r.Asks[c.name] {
			changed = append(changed, fmt.Sprintf("a %s no longer asks acpflow", c.name))
		}
	}
	for _, u := range r.Unasked {
		changed = append(changed, fmt.Sprintf("ran a tool call without asking: %s", u))
	}
	want := p.Expect.StartMode
	if want == "" {
		want = p.Mode
	}
	if r.StartMode != "" && r.StartMode != want && acpagent.DecidesAlone(p.Name, r.StartMode, "", "") {
		changed = append(changed, fmt.Sprintf("its session starts in mode %q, in which it decides alone (acpflow set it back; the preset expects %q)", r.StartMode, orNone(want)))
	} else if r.StartMode != "" && want != "" && r.StartMode != want {
		changed = append(changed, fmt.Sprintf("its session starts in mode %q, not %q", r.StartMode, want))
	}
	for _, w := range r.WideningOptions {
		if !slices.Contains(p.Expect.WideningOptions, w) {
			changed = append(changed, fmt.Sprintf("it offers an option that would widen a grant: %s (acpflow pins it off)", w))
		}
	}
	for _, s := range r.ModeSwitches {
		changed = append(changed, fmt.Sprintf("it switched on its own during a turn: %s (acpflow set it back)", s))
	}
	tier := p.Expect.Teardown
	if tier == "" {
		tier = "eof"
	}
	if r.Teardown != "" && r.Teardown != tier {
		changed = append(changed, fmt.Sprintf("after the turn it was ended by %s, not %s", r.Teardown, tier))
	}
	if r.Sandbox != "" && r.Sandbox != "ok" {
		changed = append(changed, "under sandbox: true: "+r.Sandbox)
	}
	return changed
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return strings.TrimSpace(s)
}
