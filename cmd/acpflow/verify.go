package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/internal/suggest"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
	"github.com/acpflow/acpflow/steps/acpsubagent/agentverify"
)

func newAgentsVerifyCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "verify [PRESET...]",
		Short: "Drive each preset's installed agent through scripted offline turns and report whether it still behaves as its preset expects",
		Long: `Run each preset's installed agent (its program on PATH) through scripted turns against
a local model server acpflow starts: no key, no network, a fresh HOME per turn, nothing
under your config directories. Per preset it reports the adapter's name and version, the
mode its session starts in, whether a command, a write and a delete ask, tool calls it
ran unasked, options that would widen a grant, mode switches the mode guard set back,
how it ended after the turn and how long that took, and whether it runs under sandbox: true.

Exit 1 when an agent no longer behaves as its preset expects (each change is named), 0
when every verified agent does. A preset whose program is not installed is reported, not
failed. Without PRESET, every preset verify can drive (docs/agents/README.md#verify).`,
		Example: `  acpflow agents verify
  acpflow agents verify claude codex --json
  PATH=$PWD/realagents/node_modules/.bin:$PATH acpflow agents verify copilot`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if slices.Contains(agentverify.Verifiable(), a) {
					continue
				}
				if _, ok := acpagent.LookupPreset(a); ok {
					return cli.ArgsError(cmd, fmt.Sprintf("preset %q: verify knows no offline setup for it (it verifies %s; docs/agents/README.md#verify)",
						a, strings.Join(agentverify.Verifiable(), ", ")))
				}
				return cli.ArgsError(cmd, suggest.Unknown("preset", a, agentverify.Verifiable()))
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			progress := func(preset, check string) {
				if !jsonOut {
					fmt.Fprintf(cmd.ErrOrStderr(), "verify %s: %s…\n", preset, check)
				}
			}
			reports, err := agentverify.Verify(cmd.Context(), agentverify.Options{Self: self, Presets: args, Progress: progress})
			if err != nil {
				return cli.UsageError(err)
			}
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				for _, r := range reports {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
			} else {
				printVerify(cmd.OutOrStdout(), reports)
			}
			for _, r := range reports {
				if !r.Clean() {
					return cli.Outcome(cli.ExitFailed)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "one JSON object per preset")
	return cmd
}

// printVerify prints one block per preset: a verdict line, then what was
// measured, then each change. What the agent said (its name, version,
// modes, commands, errors) is escaped and bounded: it is the agent's words.
func printVerify(w io.Writer, reports []agentverify.Report) {
	line := func(s string) string { return termtext.Line(orDash(s), 200) }
	for _, r := range reports {
		switch {
		case !r.Installed:
			fmt.Fprintf(w, "%s: not installed (no %s on PATH); not verified\n", r.Preset, presetBin(r.Preset))
			continue
		case r.Error != "":
			fmt.Fprintf(w, "%s: could not be verified: %s\n", r.Preset, termtext.Line(r.Error, 600))
		case len(r.Changed) > 0:
			fmt.Fprintf(w, "%s: CHANGED (%s %s)\n", r.Preset, line(r.Agent), line(r.Version))
		default:
			fmt.Fprintf(w, "%s: as expected (%s %s)\n", r.Preset, line(r.Agent), line(r.Version))
		}
		fmt.Fprintf(w, "  command:          %s\n", termtext.Line(r.Command, 400))
		fmt.Fprintf(w, "  starting mode:    %s\n", line(r.StartMode))
		fmt.Fprintf(w, "  asks before:      command %s, write %s, delete %s\n", yesNo(r.Asks["command"]), yesNo(r.Asks["write"]), yesNo(r.Asks["delete"]))
		fmt.Fprintf(w, "  ran unasked:      %s\n", listOrNone(r.Unasked))
		fmt.Fprintf(w, "  widening options: %s\n", listOrNone(r.WideningOptions))
		fmt.Fprintf(w, "  mode switches:    %s\n", listOrNone(r.ModeSwitches))
		fmt.Fprintf(w, "  after the turn:   %s in %d ms\n", line(r.Teardown), r.ExitMS)
		fmt.Fprintf(w, "  sandbox: true:    %s\n", line(r.Sandbox))
		for _, c := range r.Changed {
			fmt.Fprintf(w, "  changed: %s\n", termtext.Line(c, 600))
		}
	}
}

func presetBin(name string) string {
	for _, a := range agentPresets() {
		if a.Name == name {
			return a.Bin
		}
	}
	return name
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = termtext.Line(s, 200)
	}
	return strings.Join(out, "; ")
}
