package policies

import (
	"strings"
	"unicode/utf8"
)

// Glob reports whether path matches pattern as a whole (the rule helper
// `glob`). In the pattern, `*` matches any run of characters other than
// `/`, `**` any run including `/`, `?` one character other than `/`, and
// `\` makes the next character literal; everything else matches itself.
//
// # Notes
//
// A `**/` also matches nothing, so `src/**/*.go` matches `src/main.go` as
// well as `src/a/b/main.go`, as in .gitignore and most globbing libraries.
// There are no character classes: `[` is literal. The match is on the
// strings as given: neither side is cleaned or resolved (use under for
// that), so `src/../x` matches `src/**`. The cost is linear in
// len(pattern)×len(path), whatever the pattern.
func Glob(pattern, path string) bool {
	toks := globTokens(pattern)
	s := []rune(path)
	// dp[j]: the tokens so far match s[:j].
	dp := make([]bool, len(s)+1)
	next := make([]bool, len(s)+1)
	dp[0] = true
	for _, t := range toks {
		clear(next)
		switch t.kind {
		case globLiteral:
			for j := 0; j < len(s); j++ {
				next[j+1] = dp[j] && s[j] == t.r
			}
		case globOne:
			for j := 0; j < len(s); j++ {
				next[j+1] = dp[j] && s[j] != '/'
			}
		case globStar:
			next[0] = dp[0]
			for j := 1; j <= len(s); j++ {
				next[j] = dp[j] || (next[j-1] && s[j-1] != '/')
			}
		case globStarStar:
			next[0] = dp[0]
			for j := 1; j <= len(s); j++ {
				next[j] = dp[j] || next[j-1]
			}
		case globDirs:
			// Nothing, or any run that ends with "/".
			seen := false
			for j := 0; j <= len(s); j++ {
				next[j] = dp[j] || (j > 0 && s[j-1] == '/' && seen)
				seen = seen || dp[j]
			}
		}
		dp, next = next, dp
	}
	return dp[len(s)]
}

type globKind uint8

const (
	globLiteral  globKind = iota
	globOne               // ?
	globStar              // *
	globStarStar          // **
	globDirs              // **/
)

type globToken struct {
	kind globKind
	r    rune
}

func globTokens(pattern string) []globToken {
	var toks []globToken
	for i := 0; i < len(pattern); {
		r, size := utf8.DecodeRuneInString(pattern[i:])
		switch {
		case r == '\\' && i+size < len(pattern):
			i += size
			r, size = utf8.DecodeRuneInString(pattern[i:])
			toks = append(toks, globToken{kind: globLiteral, r: r})
		case r == '*' && strings.HasPrefix(pattern[i:], "**/"):
			toks = append(toks, globToken{kind: globDirs})
			size = 3
		case r == '*' && strings.HasPrefix(pattern[i:], "**"):
			toks = append(toks, globToken{kind: globStarStar})
			size = 2
		case r == '*':
			toks = append(toks, globToken{kind: globStar})
		case r == '?':
			toks = append(toks, globToken{kind: globOne})
		default:
			toks = append(toks, globToken{kind: globLiteral, r: r})
		}
		i += size
	}
	return toks
}
