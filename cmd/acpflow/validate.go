package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/workflows"
)

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Parse, type-check and lint workflows; start nothing",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			for _, file := range args {
				wf, err := workflows.Load(file)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%s, %d steps)\n", file, wf.Name, len(wf.Steps))
			}
			if len(errs) > 0 {
				return usageError(errors.Join(errs...))
			}
			return nil
		},
	}
}
