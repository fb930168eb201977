package policies

import (
	"fmt"
	"strings"
)

// Normalize fills in what a rule reads from a tool call and the agent may
// not have sent (docs/policies.md#permission-policies): RawInput becomes an empty object when it is
// nil, and Command, when empty, is derived by CommandLine from Kind, Title
// and RawInput. The ACP client calls it on each request as the agent sent
// it, and DecodePermissionRequest on each request it reads, so both see the
// same tool.
func (t *Tool) Normalize() {
	if t.Command == "" {
		t.Command = CommandLine(t.Kind, t.Title, t.RawInput)
	}
	if t.RawInput == nil {
		t.RawInput = map[string]any{}
	}
}

// CommandLine is the command line an ACP tool call will run (docs/policies.md#permission-policies
// `tool.command`), whatever shape the agent sent it in. kind, title and
// rawInput are the tool call's fields as the agent sent them (rawInput
// decoded from JSON, or nil when absent):
//
//   - rawInput.command as a string is the line itself (claude-agent-acp:
//     {"command": "rm -rf build"});
//   - an argv (a JSON array) that runs a shell with -c is the shell's
//     script (codex-acp: {"command": ["/bin/bash", "-lc", "rm -rf build"]}
//     gives "rm -rf build"); the shell may be given by path or through
//     env (`/usr/bin/env bash -c`), and -c may be in any cluster (-lc, -euc);
//   - any other argv is shell-quoted, so that the line parses back to the
//     same words: ["rm", "-rf", "my dir"] gives `rm -rf 'my dir'`;
//   - an "execute" call without raw input (nil or {}) is its title
//     (gemini-cli sends no rawInput; its title is the command verbatim);
//   - anything else is "".
//
// # Notes
//
// Argv elements that are not strings are written as fmt prints them. A NUL,
// which no argument can hold, is dropped from an argv element.
func CommandLine(kind, title string, rawInput any) string {
	m, isMap := rawInput.(map[string]any)
	if rawInput == nil || isMap && len(m) == 0 {
		if kind == "execute" {
			return title
		}
		return ""
	}
	var argv []string
	switch c := m["command"].(type) {
	case string:
		return c
	case []string:
		argv = c
	case []any:
		argv = make([]string, len(c))
		for i, a := range c {
			if s, ok := a.(string); ok {
				argv[i] = s
			} else {
				argv[i] = fmt.Sprint(a)
			}
		}
	default:
		return ""
	}
	return argvLine(argv)
}

// argvLine is the command line of an argv: a shell's -c script unwrapped,
// else the words shell-quoted.
func argvLine(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	words := make([]shellWord, len(argv))
	for i, a := range argv {
		words[i] = shellWord{text: a, literal: true}
	}
	if programName(argv[0]) == "env" && len(words) > 1 {
		// `/usr/bin/env bash -c …`, env without options: a shell by PATH.
		if script, ok := shellScript(words[1:]); ok {
			return script.text
		}
	}
	if script, ok := shellScript(words); ok {
		return script.text
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = quoteWord(a)
	}
	return strings.Join(quoted, " ")
}
