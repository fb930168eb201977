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
	if s := closestWord(word, known); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
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
