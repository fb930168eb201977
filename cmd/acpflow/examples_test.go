package main

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// TestEveryCommandHasExamples: every command a user can reach shows in its
// --help (cobra's Example) how it is used, and one of its examples runs it.
func TestEveryCommandHasExamples(t *testing.T) {
	root := newRootCmd()
	for _, c := range append([]*cobra.Command{root}, allCommands(root)...) {
		switch {
		case strings.TrimSpace(c.Example) == "":
			t.Errorf("%s has no Example: its --help shows no Examples:", c.CommandPath())
		case !strings.Contains(c.Example, c.CommandPath()):
			t.Errorf("%s: none of its examples runs it:\n%s", c.CommandPath(), c.Example)
		}
	}
}

// TestEveryExampleParses holds the examples to the commands as they are:
// each acpflow command line of an example (in a pipeline, after a pipe, on
// a continued line) is found with a real shell parser, looked up in the
// command tree, and parsed with that command's flags and argument check, so
// that an example naming a command, a flag or a number of arguments that
// no longer exists fails here rather than in a user's shell.
func TestEveryExampleParses(t *testing.T) {
	checked := 0
	root := newRootCmd()
	for _, c := range append([]*cobra.Command{root}, allCommands(root)...) {
		lines, err := exampleCommandLines(c.Example)
		if err != nil {
			t.Errorf("%s: its Example is not a shell script: %v\n%s", c.CommandPath(), err, c.Example)
			continue
		}
		for _, args := range lines {
			checked++
			if err := exampleProblem(args); err != nil {
				t.Errorf("%s: the example `acpflow %s`: %v", c.CommandPath(), strings.Join(args, " "), err)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no example command line was found: the parser is broken")
	}
}

// TestAnExampleWithARemovedFlagFails proves the check above can fail: an
// example with a flag no command has, or an argument too many, is refused.
func TestAnExampleWithARemovedFlagFails(t *testing.T) {
	for _, example := range []string{
		"  acpflow runs --stat failed",
		"  acpflow show ID --no-such-flag",
		"  acpflow show ID ANOTHER",
		"  printf x |\n    acpflow validate",
		"  acpflow no-such-command",
	} {
		lines, err := exampleCommandLines(example)
		if err != nil || len(lines) != 1 {
			t.Fatalf("%q: %d lines, %v", example, len(lines), err)
		}
		if exampleProblem(lines[0]) == nil {
			t.Errorf("%q passes", example)
		}
	}
}

// exampleCommandLines are the arguments of every acpflow command of an
// example script; an expansion ($VAR) stands for a value.
func exampleCommandLines(example string) ([][]string, error) {
	f, err := syntax.NewParser().Parse(strings.NewReader(dedent(example)), "example")
	if err != nil {
		return nil, err
	}
	cfg := &expand.Config{Env: expand.FuncEnviron(func(string) string { return "VALUE" })}
	var all [][]string
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		var words []string
		for _, w := range call.Args {
			s, err := expand.Literal(cfg, w)
			if err != nil {
				s = "VALUE"
			}
			words = append(words, s)
		}
		if words[0] == "acpflow" {
			all = append(all, words[1:])
		}
		return true
	})
	return all, nil
}

// exampleProblem is what acpflow would refuse in args before doing
// anything: an unknown command or flag, a flag's bad value, a wrong number
// of arguments.
func exampleProblem(args []string) error {
	root := newRootCmd() // flags keep what they parsed: a fresh tree each time
	root.SetErr(io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if cmd == root {
		return fmt.Errorf("names no command")
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return err
	}
	if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
		return err
	}
	return cmd.ValidateRequiredFlags()
}
