package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/internal/termtext"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/steps"
	"github.com/acpflow/acpflow/workflows"
)

func newValidateCmd() *cobra.Command {
	var policy string
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Parse, type-check and lint workflows and policy files; start nothing",
		Long: `Parse, type-check and lint each workflow FILE; start nothing. A FILE with
neither steps: nor name: but a top-level permission:, env: or sandbox: is a
bare policy file (as --policy and policy test take) and is checked as one. The outer
policy (--policy, $ACPFLOW_POLICY, /etc/acpflow/policy.yaml and the user's
file) is loaded and checked too, and each of its files is listed. Each
sandboxed step's write: entries and cwd: are resolved through symlinks, as
run would in this directory: one that leads into a denied path (~/.ssh) is
an error (docs/sandbox.md).

A valid file may still get warnings (on stderr; the exit stays 0): an agent
whose preset needs a key that would not reach it from this environment,
IS_SANDBOX=1 as root (docs/agents), or an env.NAME an expression reads while
NAME is not set (it renders as ""). run prints the same warnings.`,
		Example: `  acpflow validate workflows/examples/*.yaml
  # with the outer policy it will run under (a bare policy file)
  acpflow validate review.yaml --policy team-policy.yaml
  # a bare policy file on its own: team-policy.yaml: ok (policy file)
  acpflow validate team-policy.yaml`,
		Args: cli.Args("a workflow or policy file to check", "FILE..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			var errs []error
			outer, err := workflows.LoadOuterPolicy(policy, os.Getenv)
			if err != nil {
				errs = append(errs, err)
			}
			for _, l := range outer {
				fmt.Fprintf(cmd.OutOrStdout(), "outer policy %s: ok (%s)\n", l.File, outerKinds(l))
			}
			// Warnings (what this machine's environment would fail on
			// though the file is valid) go to stderr and keep exit 0.
			where := workflows.Environment{Ambient: policies.EnvMap(os.Environ()), Outer: outer, Root: os.Geteuid() == 0}
			// Relative sandbox paths are the workspace's: run's default,
			// this directory.
			workspace, err := os.Getwd()
			if err != nil {
				return cli.UsageError(err)
			}
			for _, file := range args {
				if handled, err := validatePolicyFile(cmd.OutOrStdout(), file); handled {
					if err != nil {
						errs = append(errs, err)
					}
					continue
				}
				wf, judge, err := workflows.LoadJudged(file)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				// Its sandboxes' paths, as run would check them in this
				// directory, under this outer policy.
				check := steps.SandboxCheck{Workspace: workspace, Outer: outer, Sandbox: wf.Sandbox, StateFiles: runs.StateFiles("")}
				if err := judge.CheckSandboxes(check); err != nil {
					errs = append(errs, err)
					continue
				}
				for _, w := range judge.Warnings(where) {
					fmt.Fprintln(cmd.ErrOrStderr(), termtext.Sanitize(w.Error()))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%s, %d steps)\n", file, wf.Name, len(wf.Steps))
			}
			if len(errs) > 0 {
				return cli.UsageError(errors.Join(errs...))
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
	if l.SandboxRequired {
		kinds = append(kinds, "sandbox")
	}
	if l.Approvals != nil {
		kinds = append(kinds, "approvals")
	}
	if l.Telemetry != nil {
		kinds = append(kinds, "telemetry")
	}
	return strings.Join(kinds, ", ")
}
