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
