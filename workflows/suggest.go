package workflows

import (
	"fmt"
	"strings"

	"github.com/acpflow/acpflow/internal/suggest"
)

// habits maps keys that users bring from other workflow engines to
// acpflow's name for the same thing, for a suggestion that edit distance
// would not find.
var habits = map[string]string{
	"depends":         "needs",
	"depends-on":      "needs",
	"depends_on":      "needs",
	"dependson":       "needs",
	"dependencies":    "needs",
	"after":           "needs",
	"timeout-minutes": "timeout",
	"retry":           "retries",
	"retry-policy":    "retries",
	"retry_policy":    "retries",
	"condition":       "if",
	"when":            "if",
	"foreach":         "for-each",
	"parallel":        "max-parallel",
	"concurrency":     "max-parallel",
	"jobs":            "steps",
	"tasks":           "steps",
	// GitHub Actions' names.
	"working-directory": "cwd",
	"strategy":          "for-each",
	"matrix":            "for-each",
	"permissions":       "policies",
}

// habitNotes add to a habit's suggestion what differs beyond the name.
var habitNotes = map[string]string{
	"timeout-minutes": " (a duration: timeout: 10m)",
	"strategy":        " (for-each: a list; each element is item)",
	"matrix":          " (for-each: a list; each element is item)",
	"permissions":     " (policies: {permission: …}: what an agent may do)",
}

// foreignKeys are keys of other engines (GitHub Actions) that acpflow has
// no key for: what to do instead.
var foreignKeys = map[string]string{
	"runs-on":   "acpflow has no runs-on: every step runs on this machine (sandbox: confines one, isolation: worktree gives it a checkout of its own)",
	"on":        "acpflow has no triggers (on:): a workflow runs when acpflow run starts it",
	"env":       "variables are set per step (a shell step's env:, an agent step's with.env:) or per agent (agents.NAME.env:), not here; ${{ env.NAME }} reads acpflow's own environment",
	"defaults":  "acpflow has no defaults: set cwd: and shell: on each step, or policies: and sandbox: for the workflow",
	"services":  "acpflow has no services: start what a step needs in a shell step before it",
	"telemetry": "telemetry: goes in an outer policy file (--policy FILE, $ACPFLOW_POLICY), not in a workflow: who runs acpflow decides where its traces go (docs/traces.md)",
}

// closestWord returns the known word closest to word, or "" when none is close
// enough to be a likely typo; a key from another engine maps to ours.
func closestWord(word string, known []string) string {
	if h, ok := habits[strings.ReplaceAll(strings.ToLower(word), "_", "-")]; ok && contains(known, h) {
		return h
	}
	return suggest.Closest(word, known)
}

// didYouMean is the tail of an "unknown X" message: a suggestion when one is
// close, else the list of what exists.
func didYouMean(word string, known []string) string {
	folded := strings.ReplaceAll(strings.ToLower(word), "_", "-")
	if s := closestWord(word, known); s != "" {
		note := ""
		if habits[folded] == s {
			note = habitNotes[folded]
		}
		return fmt.Sprintf("; did you mean %q?%s", s, note)
	}
	if note, ok := foreignKeys[folded]; ok {
		return "; " + note
	}
	if len(known) == 0 {
		return ""
	}
	return " (known: " + strings.Join(known, ", ") + ")"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
