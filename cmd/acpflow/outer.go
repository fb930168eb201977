package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs/trace"
	"github.com/acpflow/acpflow/workflows"
)

// addPolicyFlag adds --policy, an outer policy file, to a command that
// decides permissions or builds environments.
func addPolicyFlag(cmd *cobra.Command, file *string) {
	cmd.Flags().StringVar(file, "policy", "", cli.PolicyHelp)
}

// loadOuter loads the outer policy (docs/policies.md#the-outer-policy): a
// file that is named but missing, or that does not load, is bad usage.
func loadOuter(flag string) (policies.Outer, error) {
	outer, err := workflows.LoadOuterPolicy(flag, os.Getenv)
	if err != nil {
		return nil, cli.UsageError(err)
	}
	return outer, nil
}

// traceText is a run's trace id, with where it is seen when a trace URL
// template is configured (telemetry.trace-url, $ACPFLOW_TRACE_URL).
// An outer policy that does not load only costs the link here: the
// commands that run anything report it.
func traceText(id string) string {
	outer, _ := workflows.LoadOuterPolicy("", os.Getenv)
	if link := trace.Link(trace.URLTemplate(outer.Telemetry(), os.Getenv), id); link != "" {
		return id + "  " + link
	}
	return id
}
