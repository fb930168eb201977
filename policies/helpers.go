package policies

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
)

// helperFunctions are the functions every rule expression may call besides
// expr's builtins (SPEC §4.2, end). Each is declared with its Go signature,
// so a call with the wrong number or types of arguments fails when the
// policy is loaded, not when an agent first asks.
var helperFunctions = []expr.Option{
	expr.Function("glob", func(args ...any) (any, error) {
		pattern, path, err := twoStrings("glob", args)
		if err != nil {
			return nil, err
		}
		return Glob(pattern, path), nil
	}, new(func(pattern, path string) bool)),
	expr.Function("under", func(args ...any) (any, error) {
		path, dir, err := twoStrings("under", args)
		if err != nil {
			return nil, err
		}
		return Under(path, dir), nil
	}, new(func(path, dir string) bool)),
	expr.Function("commands", func(args ...any) (any, error) {
		cmd, err := oneString("commands", args)
		if err != nil {
			return nil, err
		}
		return listOrEmpty(Commands(cmd))
	}, new(func(cmd string) []string)),
	expr.Function("programs", func(args ...any) (any, error) {
		cmd, err := oneString("programs", args)
		if err != nil {
			return nil, err
		}
		return listOrEmpty(Programs(cmd))
	}, new(func(cmd string) []string)),
	expr.Function("basename", func(args ...any) (any, error) {
		path, err := oneString("basename", args)
		if err != nil {
			return nil, err
		}
		return Basename(path), nil
	}, new(func(path string) string)),
}

// helperNames are the names of helperFunctions, for suggestions.
var helperNames = []string{"glob", "under", "commands", "programs", "basename"}

// listOrEmpty gives a helper's list as an empty list rather than nil, so that a
// rule may index or iterate it whatever the line.
func listOrEmpty(list []string, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []string{}
	}
	return list, nil
}

// oneString and twoStrings check at run time what the declared signature
// cannot: a value of unknown type at compile time (a config entry, a
// raw_input field) may turn out not to be a string.
func oneString(fn string, args []any) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("%s: want 1 argument, got %d", fn, len(args))
	}
	s, ok := args[0].(string)
	if !ok {
		return "", fmt.Errorf("%s: want a string, got %T", fn, args[0])
	}
	return s, nil
}

func twoStrings(fn string, args []any) (string, string, error) {
	if len(args) != 2 {
		return "", "", fmt.Errorf("%s: want 2 arguments, got %d", fn, len(args))
	}
	a, ok := args[0].(string)
	if !ok {
		return "", "", fmt.Errorf("%s: argument 1: want a string, got %T", fn, args[0])
	}
	b, ok := args[1].(string)
	if !ok {
		return "", "", fmt.Errorf("%s: argument 2: want a string, got %T", fn, args[1])
	}
	return a, b, nil
}

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

// Under reports whether path is dir or inside it (the rule helper `under`).
//
// Two absolute paths are judged as SPEC §4.1 judges `in_workspace`: by the
// paths the kernel would reach once a tool has created the missing parent
// directories: symlinks resolved wherever they exist, and a `..` after a
// missing element back in the real directory it would be created in, so
// neither `..` nor a symlink pointing elsewhere leads out of dir (see
// resolvePath).
//
// # Notes
//
// Two relative paths are compared after cleaning only, without touching the
// file system: acpflow's own working directory means nothing to a rule, so
// `under("src/a.go", "src")` is true and `under("src/../x", "src")` false. An
// absolute path is never under a relative dir nor the reverse, and an empty
// path or dir is under nothing.
func Under(path, dir string) bool {
	if path == "" || dir == "" {
		return false
	}
	switch absP, absD := filepath.IsAbs(path), filepath.IsAbs(dir); {
	case absP && absD:
		return inside(path, dir)
	case absP || absD:
		return false
	}
	p, d := filepath.Clean(path), filepath.Clean(dir)
	if escapes(p) {
		return false
	}
	if d == "." {
		return true
	}
	return p == d || strings.HasPrefix(p, d+string(filepath.Separator))
}

// inside reports whether the absolute path, resolved, is the absolute dir,
// resolved, or inside it. A path that cannot be resolved (a symlink loop)
// is inside nothing.
func inside(path, dir string) bool {
	p, ok := resolvePath(path)
	if !ok {
		return false
	}
	d, ok := resolvePath(dir)
	if !ok {
		return false
	}
	return p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/")
}

// maxSymlinks is how many symlinks resolvePath follows before it calls the
// path a loop, as Linux does (ELOOP after 40).
const maxSymlinks = 40

// resolvePath returns the path the kernel would reach for the absolute path
// p once a tool has created the directories it lacks: each element is taken
// in turn, a symlink is replaced by its target (dangling ones too: creating
// a file through one creates its target), and `..` goes up from where the
// elements before it led. An element that does not exist is taken as the
// directory the tool would create there, so a `..` after it goes back to the
// real directory it would be created in, and the elements after that are
// resolved again.
//
// # Notes
//
// Cleaning before resolving would be wrong: with ws/escape -> ../outside,
// `ws/escape/../src` is `outside/../src`, i.e. next to ws, not ws/src. And
// stopping at the first missing element would be wrong too: with ws/link ->
// /outside, `ws/missing/../link/f` is /outside/f once ws/missing exists.
// ok is false for a symlink loop: the kernel would fail too, and nothing
// should be judged inside a directory on a path that leads nowhere. An
// element that cannot be read (no permission) counts as missing.
func resolvePath(p string) (resolved string, ok bool) {
	elems := strings.Split(p, "/")
	cur := "/"
	links := 0
	for i := 0; i < len(elems); i++ {
		switch e := elems[i]; e {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, elems[i])
		fi, err := os.Lstat(next)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxSymlinks {
			return "", false
		}
		target, err := os.Readlink(next)
		if err != nil {
			cur = next
			continue
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		elems = append(strings.Split(target, "/"), elems[i+1:]...)
		i = -1
	}
	return cur, true
}

// escapes reports whether a cleaned relative path leads out of its base.
func escapes(p string) bool {
	return p == ".." || strings.HasPrefix(p, ".."+string(filepath.Separator))
}

// Basename is the last element of path, trailing slashes ignored (the rule
// helper `basename`): `basename("/ws/src/main.go")` is "main.go". Unlike
// filepath.Base, it gives "" for "" so that a rule on a missing path does
// not see ".".
func Basename(path string) string {
	if path == "" {
		return ""
	}
	return filepath.Base(path)
}
