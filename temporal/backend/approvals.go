package backend

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/acpflow/acpflow/cli"
	"github.com/acpflow/acpflow/policies"
	"github.com/acpflow/acpflow/runs"
	"github.com/acpflow/acpflow/temporal/client"
	"github.com/acpflow/acpflow/temporal/flow"
)

// NewApprovalsCmd is `acpflow-temporal approvals [--run RUN] [--json]`.
func NewApprovalsCmd(conn *Conn) *cobra.Command {
	var runID string
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "List the permission requests waiting for a person, across the runs running on Temporal",
		Long: `List the permission requests that a policy decided to ask about (then: ask)
and that wait for an answer, in every acpflow run running on Temporal: each
one's id, run, step, tool kind and command, the rule that asked, and when its
ask-timeout ends (then its ask-fallback decides). Each run's workflow keeps
its approvals, so one outlives the worker whose step asked. Answer one with
acpflow-temporal approve ID. With --run, every approval of that run, answered
or not, with its late answers.`,
		Example: `  acpflow-temporal approvals
  acpflow-temporal approvals --json
  acpflow-temporal approvals --run nightly --json`,
		Args: cli.Args(""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := conn.Dial()
			if err != nil {
				return &cli.ExitError{Code: cli.ExitFailed, Err: err}
			}
			defer cl.Close()
			list, err := client.Approvals(cmd.Context(), cl, runID)
			if err != nil {
				return &cli.ExitError{Code: cli.ExitFailed, Err: err}
			}
			if runID == "" {
				list = pendingOnly(list)
			}
			if jsonOut {
				return printApprovalsJSON(cmd.OutOrStdout(), list)
			}
			printApprovals(cmd.OutOrStdout(), list)
			return nil
		},
	}
	cmd.Flags().StringVar(&runID, "run", "", "list every approval of this run (its id), answered or not")
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print a JSON array instead of a table")
	return cmd
}

// pendingOnly are the approvals of list still waiting for an answer.
func pendingOnly(list []flow.Approval) []flow.Approval {
	var out []flow.Approval
	for _, a := range list {
		if a.Status == runs.ApprovalPending {
			out = append(out, a)
		}
	}
	return out
}

// printApprovalsJSON prints approvals as acpflow approvals --json and
// show --json do, with the attempt (and for-each element) that asked.
func printApprovalsJSON(w io.Writer, list []flow.Approval) error {
	out := make([]map[string]any, len(list))
	for i, a := range list {
		out[i] = runs.ApprovalJSON(a.Approval)
		out[i]["attempt"] = a.Attempt
		if a.Index != nil {
			out[i]["index"] = *a.Index
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// printApprovals prints approvals as acpflow approvals does, with each
// one's status (--run lists answered ones too).
func printApprovals(w io.Writer, list []flow.Approval) {
	plain := make([]runs.Approval, len(list))
	for i, a := range list {
		plain[i] = a.Approval
	}
	cli.PrintApprovals(w, plain, true)
}

// NewApproveCmd is `acpflow-temporal approve ID allow|reject [--for run]`.
func NewApproveCmd(conn *Conn) *cobra.Command {
	var forWhat string
	cmd := &cobra.Command{
		Use:   "approve ID allow|reject",
		Short: "Answer a permission request waiting for a person, in a run on Temporal",
		Long: `Answer a pending permission request (acpflow-temporal approvals lists them):
allow selects the agent's allow-once option, reject its reject option. The
answer is a signal to the run's workflow, which keeps it even while no worker
runs the step: the step, run again by a worker, takes it. With --for run, the
same answer is given, without asking, to every later request of the run with
the same tool kind and command (recorded as a grant).

The first answer wins; a later one is refused (exit 1) and recorded as late.`,
		Example: `  acpflow-temporal approve ap-3f9a0c1d2e4b allow
  acpflow-temporal approve ap-3f9a0c1d2e4b reject
  acpflow-temporal approve ap-3f9a0c1d2e4b allow --for run`,
		Args: cli.Args("acpflow-temporal approvals lists the pending ones", "ID", "ANSWER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, forRun, err := cli.ParseAnswer(args[1], forWhat)
			if err != nil {
				return err
			}
			cl, err := conn.Dial()
			if err != nil {
				return &cli.ExitError{Code: cli.ExitFailed, Err: err}
			}
			defer cl.Close()
			a, err := client.Approve(cmd.Context(), cl, args[0], d, forRun, policies.ByCLI)
			switch {
			case errors.Is(err, runs.ErrNotFound):
				return cli.UsageError(err)
			case err != nil:
				return &cli.ExitError{Code: cli.ExitFailed, Err: err}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "approval %s: %s (run %s, step %s)\n", a.ID, runs.AnswerText(a.Approval), a.RunID, a.StepID)
			return nil
		},
	}
	cmd.Flags().StringVar(&forWhat, "for", "", "run: give the same answer to the run's later requests of the same tool kind and command")
	return cmd
}
