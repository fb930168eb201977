package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
)

func newApprovalsCmd() *cobra.Command {
	var statePath string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List the permission requests waiting for a person, across the runs of the store",
		Long: `List the permission requests that a policy decided to ask about (then: ask)
and that wait for an answer, in every run of the store: each one's id, run,
step, tool kind and command, the rule that asked, and when its ask-timeout
ends (then its ask-fallback decides). Answer one with acpflow approve ID, in
the web UI (acpflow ui), at the terminal of the run, or through a webhook's
answer link: the first answer wins.`,
		Example: `  acpflow approvals
  acpflow approvals --json`,
		Args: cli.Args(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, err := openStore(statePath)
			if err != nil {
				return cli.UsageError(err)
			}
			defer svc.Close()
			list, err := svc.PendingApprovals(cmd.Context())
			if err != nil {
				return err
			}
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(runs.ApprovalsJSON(list))
			}
			cli.PrintApprovals(cmd.OutOrStdout(), list, false)
			return nil
		},
	}
	addStateFlag(cmd, &statePath)
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print a JSON array instead of a table")
	return cmd
}

func newApproveCmd() *cobra.Command {
	var statePath, forWhat string
	cmd := &cobra.Command{
		Use:   "approve ID allow|reject",
		Short: "Answer a permission request waiting for a person",
		Long: `Answer a pending permission request (acpflow approvals lists them): allow
selects the agent's allow-once option, reject its reject option. With
--for run, the same answer is given, without asking, to every later request
of the run with the same tool kind and command (recorded as a grant).

The first answer wins, whoever gives it (the terminal, the web UI, a
webhook's link, this command); a later one is refused (exit 1) and recorded
as late. The waiting step reads the answer within 200 ms.`,
		Example: `  acpflow approve ap-3f9a0c1d2e4b allow
  acpflow approve ap-3f9a0c1d2e4b reject
  acpflow approve ap-3f9a0c1d2e4b allow --for run`,
		Args: cli.Args("acpflow approvals lists the pending ones", "ID", "ANSWER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, forRun, err := cli.ParseAnswer(args[1], forWhat)
			if err != nil {
				return err
			}
			svc, err := openStore(statePath)
			if err != nil {
				return cli.UsageError(err)
			}
			defer svc.Close()
			a, err := svc.Approve(cmd.Context(), args[0], d, forRun, policies.ByCLI)
			var late *runs.LateError
			switch {
			case errors.As(err, &late):
				return &cli.ExitError{Code: cli.ExitFailed, Err: err}
			case err != nil:
				return cli.UsageError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "approval %s: %s (run %s, step %s)\n", a.ID, runs.AnswerText(a), a.RunID, a.StepID)
			return nil
		},
	}
	addStateFlag(cmd, &statePath)
	cmd.Flags().StringVar(&forWhat, "for", "", "run: give the same answer to the run's later requests of the same tool kind and command")
	return cmd
}
