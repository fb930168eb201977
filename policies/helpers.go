package policies

import (
	"fmt"
	"path/filepath"

	"github.com/expr-lang/expr"
)

// helperFunctions are the functions every rule expression may call besides
// expr's builtins (docs/policies.md#env-policies, end). Each is declared with its Go signature,
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
