package steps

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// maxGrace is the seed's upper bound on a grace period (2147483647 ms, the
// largest timer Node accepts); kept so a workflow moved from the seed means
// the same thing here.
const maxGrace = time.Duration(math.MaxInt32) * time.Millisecond

// Check validates an agent's static configuration, the seed's config checks
// included: each grace finite, > 0 and ≤ 2147483647 ms; an empty cwd is an
// error (omit the key to use the workspace). An error is a *FieldError
// whose path is the agent's key at fault (none: the agent as a whole).
func (a *Agent) Check() error {
	switch {
	case a.Builtin != "" && a.Command != "":
		return FieldErrorf([]string{"command"}, "agent %s: set builtin or command, not both", a.Name)
	case a.Builtin == "" && a.Command == "":
		return FieldErrorf(nil, "agent %s: needs a command (or builtin: demo, or a preset)", a.Name)
	case a.Builtin != "" && a.Builtin != "demo":
		return FieldErrorf([]string{"builtin"}, "agent %s: unknown builtin %q (known: demo)", a.Name, a.Builtin)
	}
	for _, g := range []struct {
		path []string
		d    time.Duration
	}{{[]string{"start-timeout"}, a.StartTimeout}, {[]string{"dispose", "eof-grace"}, a.EOFGrace}, {[]string{"dispose", "term-grace"}, a.TermGrace}} {
		name := strings.Join(g.path, ".")
		if g.d <= 0 {
			return FieldErrorf(g.path, "agent %s: %s must be greater than 0, got %s", a.Name, name, g.d)
		}
		if g.d > maxGrace {
			return FieldErrorf(g.path, "agent %s: %s must be at most 2147483647ms, got %s", a.Name, name, g.d)
		}
	}
	if a.MaxOutput < 0 || a.MaxOutput > MaxSize {
		return FieldErrorf([]string{"max-output"}, "agent %s: max-output must be greater than 0 and at most 1 GiB, got %d bytes", a.Name, a.MaxOutput)
	}
	for id := range a.Config {
		if id == "" {
			return FieldErrorf([]string{"config"}, "agent %s: config: an option id is empty", a.Name)
		}
	}
	if a.CwdSet && a.Cwd == "" {
		return FieldErrorf([]string{"cwd"}, "agent %s: cwd is empty; omit the key to use the workspace", a.Name)
	}
	return nil
}

// ConfigValue reads the value of one `config:` option as the ACP value id
// session/set_config_option takes: a string as is, a boolean as "true" or
// "false". Anything else (a number, a list, a mapping, null) is an error:
// a value id that looks like a number must be quoted in the file.
func ConfigValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case nil:
		return "", fmt.Errorf("want a value id (a string) or true/false, got nothing")
	case map[string]any:
		return "", fmt.Errorf("want a value id (a string) or true/false, got a mapping")
	case []any:
		return "", fmt.Errorf("want a value id (a string) or true/false, got a list")
	case int, int64, float64:
		return "", fmt.Errorf("want a value id (a string) or true/false, got the number %v; quote it if the agent's value id is %q", x, fmt.Sprint(x))
	}
	return "", fmt.Errorf("want a value id (a string) or true/false, got %T", v)
}

// NewAgent returns an agent with the default timings, for a loader to
// fill in from the keys the file sets.
func NewAgent(name string) *Agent {
	return &Agent{Name: name, StartTimeout: DefaultStartTimeout, EOFGrace: DefaultEOFGrace, EOFIdle: DefaultEOFIdle, TermGrace: DefaultTermGrace}
}
