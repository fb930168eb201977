package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/internal/version"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print acpflow's version, the commit it was built from and when",
		Example: `  acpflow version`,
		Args:    cli.Args(""),
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.Line("acpflow"))
		},
	}
}
