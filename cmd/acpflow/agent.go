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
	"github.com/acpflow/acpflow/steps"
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
		Short: "List the agent presets and the command each runs",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "PRESET\tCOMMAND\tENV\tAUTH\tNOTES")
			fmt.Fprintln(w, "demo\t(builtin: demo) acpflow agent demo\t-\t-\toffline, deterministic")
			fmt.Fprintln(w, "replay\t(builtin: replay, from: FILE) acpflow agent replay FILE STEP\t-\t-\tplays a recorded transcript back")
			for _, p := range steps.Presets() {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", p.Name, strings.Join(append([]string{p.Command}, p.Argv()...), " "),
					orDash(strings.Join(p.Env, " ")), orDash(strings.Join(p.Auth, " ")), orDash(p.Notes))
			}
			w.Flush()
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
