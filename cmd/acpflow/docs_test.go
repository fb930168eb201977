package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// docs/cli.md is generated from the cobra commands, so that the reference
// cannot drift from the binary: TestCLIReferenceIsCurrent fails when it
// differs from what writeCLIReference prints, and -update-docs rewrites it.

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/cli.md from the cobra commands")

// cliReference is docs/cli.md, relative to this package's directory.
var cliReference = filepath.Join("..", "..", "docs", "cli.md")

// regenerateCLIReference is the command that rewrites docs/cli.md, from the
// module's root.
const regenerateCLIReference = "go test ./cmd/acpflow -run TestCLIReferenceIsCurrent -update-docs"

func TestCLIReferenceIsCurrent(t *testing.T) {
	var buf bytes.Buffer
	writeCLIReference(&buf, newRootCmd())
	if *updateDocs {
		if err := os.WriteFile(cliReference, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(cliReference)
	if err != nil {
		t.Fatalf("docs/cli.md: %v; generate it with:\n\t%s", err, regenerateCLIReference)
	}
	if !bytes.Equal(have, buf.Bytes()) {
		t.Fatalf("docs/cli.md is not what the commands say (%s); regenerate it with:\n\t%s",
			firstDifference(string(have), buf.String()), regenerateCLIReference)
	}
}

// firstDifference names the first line where the file and the commands
// part, for the failure message.
func firstDifference(have, want string) string {
	h, w := strings.Split(have, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(h) || i < len(w); i++ {
		var a, b string
		if i < len(h) {
			a = h[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d is %q, the commands give %q", i+1, a, b)
		}
	}
	return "they differ"
}

// writeCLIReference prints the reference of every command under root in
// markdown: its use line, its description and its flags, in the order
// cobra lists them. cobra's own help and completion commands are named
// once, not documented.
func writeCLIReference(w io.Writer, root *cobra.Command) {
	fmt.Fprintf(w, `# Command-line reference

<!-- Generated from the cobra commands by %s. Do not edit. -->

%s.

Every command takes `+"`-h`, `--help`"+`; `+"`acpflow completion bash|zsh|fish|powershell`"+` prints a
shell completion script. Durations are Go durations (`+"`90s`, `10m`, `1h30m`"+`) or a whole number of
seconds. A mistyped command or `+"`--flag`"+` is bad usage (exit 2) naming the closest one of the
command (`+"`unknown flag: --inptu; did you mean --input?`"+`). Exit codes, the JSON that `+"`--json`"+` and
`+"`--output`"+` write, and the run store are described in [results.md](results.md) and [runs.md](runs.md).

`, "`"+regenerateCLIReference+"`", root.Short)
	all := allCommands(root)

	fmt.Fprintln(w, "| command | does |\n|---|---|")
	for _, c := range all {
		fmt.Fprintf(w, "| [`%s`](#%s) | %s |\n", c.CommandPath(), anchor(c.CommandPath()), cell(c.Short))
	}
	for _, c := range all {
		fmt.Fprintf(w, "\n## %s\n\n%s.\n\n```\n%s\n```\n", c.CommandPath(), c.Short, c.UseLine())
		if c.Long != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.Long))
		}
		if c.Example != "" {
			fmt.Fprintf(w, "\nExamples:\n\n```sh\n%s\n```\n", dedent(c.Example))
		}
		if c.HasAvailableSubCommands() {
			fmt.Fprintf(w, "\nSubcommands:")
			for _, sub := range c.Commands() {
				if !sub.Hidden && sub.Name() != "help" {
					fmt.Fprintf(w, " [`%s`](#%s)", sub.Name(), anchor(sub.CommandPath()))
				}
			}
			fmt.Fprintln(w)
		}
		writeFlags(w, c.NonInheritedFlags())
	}
}

// dedent is an Example without the two spaces cobra's help indents it by.
func dedent(example string) string {
	lines := strings.Split(example, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "  ")
	}
	return strings.Join(lines, "\n")
}

// allCommands is every command under root that a user can run or list:
// cobra's own help and completion commands left out, as in docs/cli.md.
func allCommands(root *cobra.Command) []*cobra.Command {
	var all []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			all = append(all, sub)
			walk(sub)
		}
	}
	walk(root)
	return all
}

// writeFlags prints a command's flags as a table, --help left out.
func writeFlags(w io.Writer, fs *pflag.FlagSet) {
	var rows []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + ", " + name
		}
		typ := f.Value.Type()
		switch typ {
		case "bool":
			typ = ""
		case "stringArray":
			typ = "string (repeatable)"
		}
		if typ != "" {
			name += " " + strings.ToUpper(strings.Fields(typ)[0])
			if strings.HasSuffix(typ, "(repeatable)") {
				name += " …"
			}
		}
		def := f.DefValue
		switch {
		case def == "" || def == "[]" || (f.Value.Type() == "bool" && def == "false"):
			def = "—"
		default:
			def = "`" + def + "`"
		}
		rows = append(rows, fmt.Sprintf("| `%s` | %s | %s |", name, def, cell(f.Usage)))
	})
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\n| flag | default | meaning |\n|---|---|---|\n%s\n", strings.Join(rows, "\n"))
}

// cell makes text safe inside a markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

// anchor is the id GitHub gives the heading "## text".
func anchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
