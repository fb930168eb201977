package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/runcmd"
	"github.com/acpflow/acpflow/workflows"
)

func newValidateCmd() *cobra.Command {
	var policy string
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Parse, type-check and lint workflows; start nothing",
		Long: `Parse, type-check and lint each workflow FILE; start nothing. The outer
policy (--policy, $ACPFLOW_POLICY, /etc/acpflow/policy.yaml and the user's
file) is loaded and checked too, and each of its files is listed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			outer, err := workflows.LoadOuterPolicy(policy, os.Getenv)
			if err != nil {
				errs = append(errs, err)
			}
			for _, l := range outer {
				fmt.Fprintf(cmd.OutOrStdout(), "outer policy %s: ok (%s)\n", l.File, outerKinds(l))
			}
			for _, file := range args {
				wf, err := workflows.Load(file)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%s, %d steps)\n", file, wf.Name, len(wf.Steps))
			}
			if len(errs) > 0 {
				return runcmd.UsageError(errors.Join(errs...))
			}
			return nil
		},
	}
	addPolicyFlag(cmd, &policy)
	return cmd
}

// outerKinds names the kinds of policy an outer file sets.
func outerKinds(l policies.OuterPolicy) string {
	var kinds []string
	if l.Permission != nil {
		kinds = append(kinds, "permission")
	}
	if l.Env != nil {
		kinds = append(kinds, "env")
	}
	return strings.Join(kinds, ", ")
}
