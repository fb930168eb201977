package workflows

import (
	"fmt"
	"strings"
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

// suggest returns the known word closest to word, or "" when none is close
// enough to be a likely typo.
func suggest(word string, known []string) string {
	norm := normalizeKey(word)
	if h, ok := habits[norm]; ok && contains(known, h) {
		return h
	}
	best, bestDist := "", -1
	for _, k := range known {
		d := editDistance(norm, normalizeKey(k))
		if bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	if best == "" {
		return ""
	}
	// One edit in four characters, at least one and at most three, is the
	// range where a typo is likelier than a different word.
	limit := min(max(1, len(norm)/4+1), 3)
	if bestDist > limit || bestDist >= len(norm) {
		return ""
	}
	return best
}

// didYouMean is the tail of an "unknown X" message: a suggestion when one is
// close, else the list of what exists.
func didYouMean(word string, known []string) string {
	if s := suggest(word, known); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	if len(known) == 0 {
		return ""
	}
	return " (known: " + strings.Join(known, ", ") + ")"
}

// normalizeKey folds case and the `_`/`-` spelling, the two ways users most
// often miss a key that they otherwise know.
func normalizeKey(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), "_", "-")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// editDistance is the Levenshtein distance with adjacent transpositions
// counted as one edit ("nedes" is one edit from "needs").
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		// Keys are short; a long word is not a typo of one.
		return max(len(ra), len(rb))
	}
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
