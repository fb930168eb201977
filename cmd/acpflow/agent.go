package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/internal/demoagent"
	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/internal/suggest"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

func newAgentCmd() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "agent",
		Short: "Run one of acpflow's built-in ACP agents on stdio",
		Example: `  acpflow agent demo
  acpflow probe -- acpflow agent demo`,
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "demo",
		Short: "The deterministic demo agent: offline, no key",
		Example: `  # what a workflow's builtin: demo starts; probe it as any agent
  acpflow probe -- acpflow agent demo`,
		Args: cli.Args(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return demoagent.Serve(ctx, os.Stdin, os.Stdout)
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "replay FILE STEP",
		Short: "Play back a step's recorded transcript (STEP#INDEX: a for-each element), as builtin: replay does",
		Long: `Play back the last recorded attempt of STEP in the transcript FILE (as acpflow export
writes it) as an ACP agent on stdio: the recorded answers, updates and permission requests, as
fast as the client reads. A permission answered differently from the recording ends the turn
with stop reason refusal, saying so on stderr and as the turn's last message
(docs/transcripts.md#replay).`,
		Example: `  acpflow export 20261202T180412-3f9a -o review.transcript.json
  acpflow probe -- acpflow agent replay review.transcript.json review`,
		Args: cli.Args("a transcript file that acpflow export wrote, and a step id in it", "FILE", "STEP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			rec, err := replayagent.Load(args[0], args[1])
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return replayagent.Serve(ctx, rec, os.Stdin, os.Stdout, os.Stderr)
		},
	})
	return cmd
}

func newAgentsCmd() *cobra.Command {
	var wide bool
	cmd := &cobra.Command{
		Use:   "agents [NAME]",
		Short: "List the agent presets: the command each runs, its mode, what it needs, what it still runs unasked",
		Long: `List the agent presets in a table that fits 80 columns: each one's name, the mode
it starts its agent in, the agent's release its settings were measured on, and
the command it runs (cut to fit). NAME shows one preset whole: its command, the
keys it reads, its auth methods, its notes and what it still runs without
asking. --wide prints every column and every preset's notes, however wide.`,
		Example: `  acpflow agents
  acpflow agents claude
  acpflow agents --wide`,
		Args: cli.Args("", "[NAME]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			all := agentPresets()
			out := cmd.OutOrStdout()
			switch {
			case len(args) == 1:
				for _, a := range all {
					if a.Name == args[0] {
						printAgent(out, a)
						return nil
					}
				}
				names := make([]string, len(all))
				for i, a := range all {
					names[i] = a.Name
				}
				return cli.ArgsError(cmd, suggest.Unknown("agent", args[0], names))
			case wide:
				printAgentsWide(out, all)
			default:
				printAgents(out, all)
			}
			return nil
		},
	}
	cmd.AddCommand(newAgentsVerifyCmd())
	cmd.Flags().BoolVar(&wide, "wide", false, "every column (the keys each preset reads, its auth methods) and every preset's notes, however wide")
	return cmd
}

// agentPreset is a row of `acpflow agents`: a preset, or one of the
// builtin agents, which a workflow names the same way.
type agentPreset struct {
	acpagent.Preset
	builtin bool
}

// command is the command line the agent is started with.
func (a agentPreset) command() string {
	if a.builtin {
		return a.Command
	}
	return strings.Join(append([]string{a.Command}, a.Argv()...), " ")
}

func agentPresets() []agentPreset {
	all := []agentPreset{
		{builtin: true, Preset: acpagent.Preset{Name: "demo", Command: "acpflow agent demo",
			Description: "acpflow's deterministic demo agent (builtin: demo): offline, no key"}},
		{builtin: true, Preset: acpagent.Preset{Name: "replay", Command: "acpflow agent replay FILE STEP",
			Description: "plays back a step's recorded transcript (builtin: replay, from: FILE)"}},
	}
	for _, p := range acpagent.Presets() {
		all = append(all, agentPreset{Preset: p})
	}
	return all
}

// shortMode is a mode as the narrow table shows it: a URL id (Copilot's
// "https://…/session-modes#agent") by its fragment, "…#agent"; `agents
// NAME` shows it whole.
func shortMode(mode string) string {
	if i := strings.LastIndex(mode, "#"); i > 0 && strings.Contains(mode, "://") {
		return "…" + mode[i:]
	}
	return orDash(mode)
}

// narrowWidth is what the default table of agents fits in: a terminal's
// width before anyone resized it, as kubectl's default columns do.
const narrowWidth = 80

// printAgents prints the narrow table: the long texts are one command away
// (agents NAME, --wide), and the command is cut to what the line has left.
func printAgents(out io.Writer, all []agentPreset) {
	head := []string{"PRESET", "MODE", "MEASURED"}
	widths := []int{len(head[0]), len(head[1]), len(head[2])}
	for _, a := range all {
		for i, cell := range []string{a.Name, shortMode(a.Mode), orDash(a.Version)} {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	left := narrowWidth
	row := func(cells ...string) {
		line := ""
		for i, c := range cells[:3] {
			line += c + strings.Repeat(" ", widths[i]+2-utf8.RuneCountInString(c))
		}
		fmt.Fprintln(out, line+cutRunes(cells[3], left))
	}
	for _, w := range widths {
		left -= w + 2
	}
	row(append(head, "COMMAND")...)
	for _, a := range all {
		row(a.Name, shortMode(a.Mode), orDash(a.Version), a.command())
	}
	fmt.Fprintln(out, "\nOne preset whole: acpflow agents NAME; every column: acpflow agents --wide")
}

// cutRunes is s in at most n runes, … marking a cut.
func cutRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 1 {
		return s
	}
	return string(r[:n-1]) + "…"
}

// printAgentsWide prints every column and each preset's notes.
func printAgentsWide(out io.Writer, all []agentPreset) {
	w := newTable(out, "PRESET\tMODE\tMEASURED\tCOMMAND\tENV\tAUTH")
	for _, a := range all {
		command := a.command()
		if a.builtin {
			command = "(builtin: " + a.Name + ") " + command
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", a.Name, orDash(a.Mode), orDash(a.Version), command,
			orDash(strings.Join(a.Env, " ")), orDash(strings.Join(a.Auth, " ")))
	}
	w.Flush()
	fmt.Fprintln(out)
	for _, a := range all {
		if !a.builtin {
			fmt.Fprintf(out, "%s: %s.%s\n", a.Name, a.Description, coverage(a.Preset, " "))
		}
	}
}

// coverage says what a preset's agent still runs without asking, with its
// notes first, each as sentences begun by sep.
func coverage(p acpagent.Preset, sep string) string {
	s := ""
	if p.Notes != "" {
		s += sep + sentence(p.Notes) + "."
	}
	switch {
	case p.Unasked != "":
		s += sep + "Still runs without asking: " + p.Unasked + "."
	case p.Version == "":
		s += sep + "Not measured: which tool calls it runs without asking is unknown; a call that runs unasked is judged by the policy (unasked:)."
	default:
		s += sep + "Asks before every command, write, delete and move."
	}
	return s
}

// printAgent prints one preset whole, its long texts wrapped to fit the
// narrow width.
func printAgent(out io.Writer, a agentPreset) {
	fmt.Fprintf(out, "%s: %s\n", a.Name, a.Description)
	field := func(name, value string) {
		fmt.Fprint(out, wrapText(fmt.Sprintf("  %-10s", name+":"), value, narrowWidth))
	}
	field("command", a.command())
	if a.builtin {
		return
	}
	field("mode", orDash(a.Mode))
	field("measured", orDash(a.Version))
	field("env", orDash(strings.Join(a.Env, " ")))
	field("auth", orDash(strings.Join(a.Auth, " ")))
	if a.Notes != "" {
		field("notes", sentence(a.Notes)+".")
	}
	field("unasked", strings.TrimSpace(strings.TrimPrefix(coverage(acpagent.Preset{Version: a.Version, Unasked: a.Unasked}, ""), "Still runs without asking: ")))
	field("docs", "docs/agents/"+a.Name+".md")
}

// wrapText is text after label, its words wrapped at width, each further
// line indented as far as label: a long word (a command) keeps its line.
func wrapText(label, text string, width int) string {
	indent := strings.Repeat(" ", utf8.RuneCountInString(label))
	var b strings.Builder
	line := label
	n := 0 // words on line
	for _, word := range strings.Fields(text) {
		if n > 0 && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > width {
			b.WriteString(line + "\n")
			line, n = indent, 0
		}
		if n > 0 {
			line += " "
		}
		line += word
		n++
	}
	b.WriteString(line + "\n")
	return b.String()
}

// sentence is s with its first letter upper case.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
