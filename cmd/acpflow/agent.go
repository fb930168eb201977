package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/internal/demoagent"
	"github.com/acpflow/acpflow/internal/replayagent"
	"github.com/acpflow/acpflow/steps/acpsubagent/acpagent"
)

func newAgentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run one of acpflow's built-in ACP agents on stdio",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "demo",
		Short: "The deterministic demo agent: offline, no key",
		Args:  cobra.NoArgs,
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
		Args: cobra.ExactArgs(2),
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
	return &cobra.Command{
		Use:   "agents",
		Short: "List the agent presets: the command each runs, its mode, what it needs, what it still runs unasked",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			out := cmd.OutOrStdout()
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PRESET\tMODE\tMEASURED\tCOMMAND\tENV\tAUTH")
			fmt.Fprintln(w, "demo\t-\t-\t(builtin: demo) acpflow agent demo\t-\t-")
			fmt.Fprintln(w, "replay\t-\t-\t(builtin: replay) acpflow agent replay FILE STEP\t-\t-")
			for _, p := range acpagent.Presets() {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, orDash(p.Mode), orDash(p.Version),
					strings.Join(append([]string{p.Command}, p.Argv()...), " "),
					orDash(strings.Join(p.Env, " ")), orDash(strings.Join(p.Auth, " ")))
			}
			w.Flush()
			fmt.Fprintln(out)
			for _, p := range acpagent.Presets() {
				fmt.Fprintf(out, "%s: %s.", p.Name, p.Description)
				if p.Notes != "" {
					fmt.Fprintf(out, " %s.", sentence(p.Notes))
				}
				switch {
				case p.Version == "":
					fmt.Fprint(out, " Not measured: which tool calls it runs without asking is unknown; a call that runs unasked is judged by the policy (unasked:).")
				case p.Unasked != "":
					fmt.Fprintf(out, " Still runs without asking: %s.", p.Unasked)
				default:
					fmt.Fprint(out, " Asks before every command, write, delete and move.")
				}
				fmt.Fprintln(out)
			}
		},
	}
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
