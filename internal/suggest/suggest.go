// Package suggest finds the word a user probably meant: the "did you mean"
// of every "unknown key" and "unknown name" message, in workflow files and
// policy files alike, so that both suggest the same way.
package suggest

import (
	"fmt"
	"strings"
)

// Closest returns the word of known closest to word, or "" when none is
// close enough to be a likely typo. Case and the `_`/`-` spelling are
// ignored, the two ways users most often miss a key they otherwise know.
func Closest(word string, known []string) string {
	norm := fold(word)
	if norm == "" {
		return ""
	}
	best, bestDist := "", -1
	for _, k := range known {
		d := Distance(norm, fold(k))
		if bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	// One edit in four characters, at least one and at most three, is the
	// range where a typo is likelier than a different word.
	n := len([]rune(norm))
	if limit := min(max(1, n/4+1), 3); bestDist < 0 || bestDist > limit || bestDist >= n {
		return ""
	}
	return best
}

// Unknown is the message for a word that is not one of known, the words a
// flag or key takes: what was given, the likely typo's fix, and the whole
// list, so that a user never has to look the words up elsewhere (`unknown
// status "faild"; did you mean "failed"? (one of: running, succeeded, …)`).
// what names the kind of word ("status").
func Unknown(what, word string, known []string) string {
	msg := fmt.Sprintf("unknown %s %q", what, word)
	if c := Closest(word, known); c != "" {
		msg += fmt.Sprintf("; did you mean %q?", c)
	}
	return msg + " (one of: " + strings.Join(known, ", ") + ")"
}

// fold lowers the case and spells `_` as `-`.
func fold(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), "_", "-")
}

// Distance is the edit distance between a and b: insertions, deletions,
// substitutions and swaps of adjacent runes ("kidn" is one edit from
// "kind") each count one.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		// Keys and names are short; a long word is not a typo of one.
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
